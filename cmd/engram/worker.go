package main

import (
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/config"
)

// dialTemporal connects a command that only starts or queries workflows.
func dialTemporal(cfg config.Config) (client.Client, error) {
	return app.DialTemporal(cfg, logger(), nil, nil)
}

// temporalClient reads the configuration and dials Temporal with it.
func temporalClient() (config.Config, client.Client, error) {
	cfg, err := loadConfig()
	if err != nil {
		return cfg, nil, err
	}
	c, err := dialTemporal(cfg)
	return cfg, c, err
}

func workerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run the Temporal worker: memory writes, tasks, maintenance",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			a, err := app.Build(cmd.Context(), cfg, logger(), app.Options{Worker: true})
			if err != nil {
				return err
			}
			defer a.Close()
			<-cmd.Context().Done()
			return nil
		},
	}
}
