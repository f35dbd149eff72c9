package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/engramhq/engram/storage"
)

func keysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage API keys (create, list, revoke) in Postgres (ENGRAM_DATABASE_URL)",
		Long: `API keys authenticate every API call (Authorization: Bearer <key>). A key belongs to one
tenant, which is the tenant of every call made with it, and holds roles:

  agent     ingest, recall, read facts and drive tasks for the users the key allows:
            its --user and every --allow-user; a key with neither may act for any
            user of its tenant
  reviewer  list and decide pending reviews, read and invalidate facts of its tenant
  admin     everything of its tenant, including schemas

Keys are stored hashed (sha256); the key itself is printed once, by create.`,
	}
	cmd.AddCommand(keysCreateCmd(), keysListCmd(), keysRevokeCmd(), keysRotateDataCmd(), keysDataStatusCmd())
	return cmd
}

// openStore opens the database of ENGRAM_DATABASE_URL for a command that reads or
// writes it directly, and refuses one that is not migrated (storage.ErrNotMigrated).
func openStore(cmd *cobra.Command) (*storage.Store, error) {
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	st, err := storage.Open(cmd.Context(), cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := st.CheckMigrated(cmd.Context()); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// withStore runs f on the database openStore opens, and closes it.
func withStore(cmd *cobra.Command, f func(*storage.Store) error) error {
	st, err := openStore(cmd)
	if err != nil {
		return err
	}
	defer st.Close()
	return f(st)
}

func keysCreateCmd() *cobra.Command {
	var k storage.APIKey
	var roles []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create --tenant T --principal P --role agent|reviewer|admin",
		Short: "Create an API key and print it (once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlag("tenant", k.TenantID); err != nil {
				return err
			}
			if err := requireFlag("principal", k.Principal); err != nil {
				return err
			}
			for _, r := range roles {
				for _, part := range strings.Split(r, ",") {
					if part = strings.TrimSpace(part); part != "" {
						k.Roles = append(k.Roles, part)
					}
				}
			}
			var key string
			err := withStore(cmd, func(st *storage.Store) (err error) {
				key, err = st.CreateAPIKey(cmd.Context(), &k)
				return err
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printValue(out, struct {
					Key string
					keyView
				}{key, viewKey(k)})
			}
			fmt.Fprintln(out, key)
			fmt.Fprintf(cmd.ErrOrStderr(), "created key %s (id %s) for %s in tenant %s, roles %s; it is shown only this once\n",
				k.Prefix, k.ID, k.Principal, k.TenantID, strings.Join(k.Roles, ","))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&k.TenantID, "tenant", "", "tenant of every call made with the key (required)")
	f.StringVar(&k.Principal, "principal", "", "who holds the key, recorded as actor and reviewer (required)")
	f.StringSliceVar(&roles, "role", nil, "agent, reviewer or admin (repeat or comma-separate for several)")
	f.StringVar(&k.UserID, "user", "", "bind the key to this user: the default user of its calls")
	f.StringVar(&k.DepartmentID, "department", "", "bind the key to this department")
	f.StringVar(&k.AgentID, "agent", "", "bind the key to this agent")
	f.StringArrayVar(&k.AllowedUsers, "allow-user", nil, "a further user the key may act for (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print the key and its record as JSON")
	return cmd
}

func keysListCmd() *cobra.Command {
	var tenant string
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List API keys (never the keys themselves)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(st *storage.Store) error {
				keys, err := st.ListAPIKeys(cmd.Context(), tenant, all)
				if err != nil {
					return err
				}
				views := make([]keyView, len(keys))
				for i := range keys {
					views[i] = viewKey(keys[i])
				}
				return printRecords(cmd.OutOrStdout(), asJSON, struct{ Keys []keyView }{views},
					"PREFIX\tID\tTENANT\tPRINCIPAL\tROLES\tUSER\tALLOWED USERS\tCREATED\tREVOKED", func(tw io.Writer) {
						for _, k := range keys {
							revoked := ""
							if k.RevokedAt != nil {
								revoked = k.RevokedAt.Format("2006-01-02 15:04")
							}
							fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Prefix, k.ID, k.TenantID, k.Principal, strings.Join(k.Roles, ","),
								k.UserID, strings.Join(k.AllowedUsers, ","), k.CreatedAt.Format("2006-01-02 15:04"), revoked)
						}
					})
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only keys of this tenant")
	cmd.Flags().BoolVar(&all, "all", false, "include revoked keys")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func keysRevokeCmd() *cobra.Command {
	var tenant string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revoke PREFIX|ID|KEY",
		Short: "Revoke an API key by its prefix, id or the key itself; calls with it fail from now on",
		Args:  positional(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var k *storage.APIKey
			err := withStore(cmd, func(st *storage.Store) (err error) {
				k, err = st.RevokeAPIKey(cmd.Context(), tenant, args[0])
				return err
			})
			if err == storage.ErrNotFound {
				return &exitError{code: exitNotFound, err: fmt.Errorf("no live key %q", args[0])}
			}
			if err != nil {
				return err
			}
			if asJSON {
				return printValue(cmd.OutOrStdout(), viewKey(*k))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked key %s of %s in tenant %s\n", k.Prefix, k.Principal, k.TenantID)
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only revoke a key of this tenant")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the revoked key's record as JSON")
	return cmd
}

// keyView is an API key's record as --json prints it: everything but its hash.
type keyView struct {
	ID           string
	Prefix       string
	TenantID     string
	Principal    string
	Roles        []string
	UserID       string   `json:",omitempty"`
	DepartmentID string   `json:",omitempty"`
	AgentID      string   `json:",omitempty"`
	AllowedUsers []string `json:",omitempty"`
	CreatedAt    time.Time
	RevokedAt    *time.Time `json:",omitempty"`
}

func viewKey(k storage.APIKey) keyView {
	return keyView{ID: k.ID, Prefix: k.Prefix, TenantID: k.TenantID, Principal: k.Principal, Roles: k.Roles, UserID: k.UserID,
		DepartmentID: k.DepartmentID, AgentID: k.AgentID, AllowedUsers: k.AllowedUsers, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}
