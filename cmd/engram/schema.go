package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/schema"
)

var schemaFields = fieldFlags{"name": "name", "version": "version", "source": "file", "expected_version": "expected-version"}

// schemaAPICmds are `engram schema get|put`, added to the schema command group.
func schemaAPICmds() []*cobra.Command { return []*cobra.Command{schemaGetCmd(), schemaPutCmd()} }

func schemaGetCmd() *cobra.Command {
	var o apiOpts
	var version int
	var source bool
	cmd := &cobra.Command{
		Use:   "get NAME [--version N]",
		Short: "A schema: the tenant's stored version (latest by default) or the built-in one",
		Example: `  engram schema get travel
  engram schema get travel --source > travel.yaml`,
		Args: positional(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := strings.TrimSpace(args[0])
			if name == "" {
				return badArg("NAME is empty")
			}
			if version < 0 {
				return badFlag("version", "is negative")
			}
			res, err := call(cmd, &o, schemaFields, func(ctx context.Context, c *conn) (*engramv1.GetSchemaResponse, error) {
				return c.GetSchema(ctx, name, version)
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case o.asJSON:
				return printJSON(out, res)
			case source:
				_, err := io.WriteString(out, res.Schema.GetSource())
				return err
			}
			printSchemaInfo(out, res.Schema)
			if len(res.Versions) > 0 {
				vs := make([]string, len(res.Versions))
				for i, v := range res.Versions {
					vs[i] = fmt.Sprint(v)
				}
				fmt.Fprintf(out, "stored versions: %s\n", strings.Join(vs, ", "))
			}
			fmt.Fprintf(out, "\n%s", res.Schema.GetSource())
			return nil
		},
	}
	o.register(cmd.Flags())
	cmd.Flags().IntVar(&version, "version", 0, "version (default: the latest)")
	cmd.Flags().BoolVar(&source, "source", false, "print only the YAML document")
	return cmd
}

func printSchemaInfo(out io.Writer, s *engramv1.SchemaInfo) {
	kind := "stored"
	if s.Builtin {
		kind = "built-in"
	}
	fmt.Fprintf(out, "schema %s version %d (%s)", s.Name, s.Version, kind)
	if s.CreatedBy != "" {
		fmt.Fprintf(out, " by %s at %s", s.CreatedBy, tsText(s.CreatedAt))
	}
	fmt.Fprintln(out)
	if s.Description != "" {
		fmt.Fprintf(out, "%s\n", strings.TrimSpace(s.Description))
	}
}

func schemaPutCmd() *cobra.Command {
	var o apiOpts
	var file, name string
	var expected int
	cmd := &cobra.Command{
		Use:   "put --file SCHEMA.yaml [--name N] [--expected-version N]",
		Short: "Validate a schema document and store it as the tenant's next version (admin keys)",
		Long: `Validate a schema document locally and on the server, then store it as the next version of
the tenant's schema of that name. An invalid document is refused with every problem and
its line; nothing is stored. --expected-version makes the put fail unless the latest stored
version is that one (0: none stored yet).`,
		Example: `  engram schema get travel --source > travel.yaml   # edit it
  engram schema put --file travel.yaml`,
		Args: positional(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlag("file", file); err != nil {
				return err
			}
			var src []byte
			var err error
			if file == "-" {
				src, err = io.ReadAll(os.Stdin)
			} else {
				src, err = os.ReadFile(file)
			}
			if err != nil {
				return badFlag("file", "%v", err)
			}
			if strings.TrimSpace(string(src)) == "" {
				return badFlag("file", "%s is empty", file)
			}
			sc, err := schema.Load(src)
			if err != nil {
				var le *schema.LoadError
				if errors.As(err, &le) {
					lines := make([]string, len(le.Problems))
					for i, p := range le.Problems {
						lines[i] = "  " + p.String()
					}
					return badFlag("file", "%s is not a valid schema:\n%s", file, strings.Join(lines, "\n"))
				}
				return badFlag("file", "%s: %v", file, err)
			}
			if name == "" {
				name = sc.Name
			} else if name != sc.Name {
				return badFlag("name", "%q does not match the document's name %q", name, sc.Name)
			}
			req := &engramv1.PutSchemaRequest{Name: name, Source: string(src)}
			if cmd.Flags().Changed("expected-version") {
				if expected < 0 {
					return badFlag("expected-version", "is negative")
				}
				v := int32(expected)
				req.ExpectedVersion = &v
			}
			info, err := call(cmd, &o, schemaFields, func(ctx context.Context, c *conn) (*engramv1.SchemaInfo, error) {
				return c.PutSchema(ctx, req)
			})
			if err != nil {
				return err
			}
			return o.show(cmd, info, func(out io.Writer) error {
				printSchemaInfo(out, info)
				return nil
			})
		},
	}
	o.register(cmd.Flags())
	cmd.Flags().StringVar(&file, "file", "", "the YAML document ('-' reads stdin) (required)")
	cmd.Flags().StringVar(&name, "name", "", "schema name (default: the document's name)")
	cmd.Flags().IntVar(&expected, "expected-version", 0, "fail unless the latest stored version is this one (0: none stored yet)")
	return cmd
}
