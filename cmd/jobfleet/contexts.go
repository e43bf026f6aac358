package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/auth"
)

// cliConfig is the client configuration file,
// <user config dir>/jobfleet/config.json (os.UserConfigDir: on Linux
// $XDG_CONFIG_HOME or ~/.config), mode 0600 in a 0700 directory. Its shape
// is a contract:
//
//	{"current_context":"dev","contexts":{"dev":{"server":"http://127.0.0.1:8080",
//	  "token":"...","token_file":"","ca":"","cert":"","key":""}}}
type cliConfig struct {
	CurrentContext string                `json:"current_context"`
	Contexts       map[string]cliContext `json:"contexts"`
}

// cliContext is one named context: where the API is and how to
// authenticate to it. CA, Cert and Key are the TLS client settings.
type cliContext struct {
	Server    string `json:"server"`
	Token     string `json:"token"`
	TokenFile string `json:"token_file"`
	CA        string `json:"ca"`
	Cert      string `json:"cert"`
	Key       string `json:"key"`
}

// configPath returns the path of the client configuration file.
func configPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("client configuration: %w", err)
	}
	return filepath.Join(dir, "jobfleet", "config.json"), nil
}

// loadConfig reads the configuration file; a missing file is an empty
// configuration.
func loadConfig() (cliConfig, error) {
	cfg := cliConfig{Contexts: map[string]cliContext{}}
	path, err := configPath()
	if err != nil {
		return cfg, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("client configuration: %w", err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return cfg, fmt.Errorf("client configuration %s: %w", path, err)
	}
	if cfg.Contexts == nil {
		cfg.Contexts = map[string]cliContext{}
	}
	return cfg, nil
}

// saveConfig writes the configuration file (0600, its directory 0700),
// replacing it atomically.
func saveConfig(cfg cliConfig) error {
	path, err := configPath()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("client configuration: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("client configuration: %w", err)
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".config-*.json")
	if err != nil {
		return fmt.Errorf("client configuration: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing to remove
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("client configuration: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("client configuration: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("client configuration: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("client configuration: %w", err)
	}
	return nil
}

// validContextName reports whether name can name a context: 1 to 64
// letters, digits, '.', '_' or '-'.
func validContextName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("context name %q: must be 1 to 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("context name %q: use letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

func newContextCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Manage named contexts: an API server and the credential to use with it",
		Long: `A context names an orchestrator's API URL and a credential (a token, or a
file holding one), so that client commands need neither --server nor
--token. Contexts live in <user config dir>/jobfleet/config.json (mode
0600). Client commands use --context, else JOBFLEET_CONTEXT, else the
current context; a flag or environment variable given for the server or
the token overrides the context's. jobfleet dev writes a "dev" context and
makes it current.`,
	}
	requireSubcommand(cmd)
	cmd.AddCommand(&cobra.Command{
		Use: "ls", Short: "List the contexts (the current one marked *)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			names := make([]string, 0, len(cfg.Contexts))
			for n := range cfg.Contexts {
				names = append(names, n)
			}
			slices.Sort(names)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER\tCREDENTIAL")
			for _, n := range names {
				c := cfg.Contexts[n]
				cur := ""
				if n == cfg.CurrentContext {
					cur = "*"
				}
				cred := "none"
				switch {
				case c.Token != "":
					cred = "token"
				case c.TokenFile != "":
					cred = "file " + c.TokenFile
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cur, n, c.Server, cred)
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "use NAME", Short: "Make context NAME the current one", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			if _, ok := cfg.Contexts[args[0]]; !ok {
				return fmt.Errorf("no context %q (jobfleet context ls lists them)", args[0])
			}
			cfg.CurrentContext = args[0]
			if err := saveConfig(cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "current context: %s\n", args[0])
			return nil
		},
	})
	cmd.AddCommand(newContextSetCmd())
	cmd.AddCommand(newContextShowCmd())
	cmd.AddCommand(&cobra.Command{
		Use: "rm NAME", Short: "Remove context NAME", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			if _, ok := cfg.Contexts[args[0]]; !ok {
				return fmt.Errorf("no context %q", args[0])
			}
			delete(cfg.Contexts, args[0])
			if cfg.CurrentContext == args[0] {
				cfg.CurrentContext = ""
			}
			if err := saveConfig(cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed context %s\n", args[0])
			return nil
		},
	})
	return cmd
}

func newContextSetCmd() *cobra.Command {
	var c cliContext
	var use bool
	cmd := &cobra.Command{
		Use:   "set NAME",
		Short: "Create or change context NAME (only the fields given change)",
		Example: `  jobfleet context set prod --server https://jobfleet.example:8080 --token-file ~/.jobfleet/prod.token
  jobfleet context use prod`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := validContextName(name); err != nil {
				return err
			}
			fs := cmd.Flags()
			if fromFlag(fs.Lookup("token")) && fromFlag(fs.Lookup("token-file")) {
				return fmt.Errorf("give --token or --token-file, not both")
			}
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			cur := cfg.Contexts[name]
			// Only flags given on the command line count: a JOBFLEET_TOKEN in
			// the environment must not end up in the file by accident.
			set := func(flag string, dst *string, v string) {
				if fromFlag(fs.Lookup(flag)) {
					*dst = v
				}
			}
			set("server", &cur.Server, c.Server)
			set("token", &cur.Token, c.Token)
			set("token-file", &cur.TokenFile, c.TokenFile)
			if fromFlag(fs.Lookup("token")) {
				cur.TokenFile = ""
			}
			if fromFlag(fs.Lookup("token-file")) {
				cur.Token = ""
				if cur.TokenFile != "" {
					abs, err := filepath.Abs(cur.TokenFile)
					if err != nil {
						return err
					}
					cur.TokenFile = abs
				}
			}
			set("ca", &cur.CA, c.CA)
			set("cert", &cur.Cert, c.Cert)
			set("key", &cur.Key, c.Key)
			cfg.Contexts[name] = cur
			if use || cfg.CurrentContext == "" {
				cfg.CurrentContext = name
			}
			if err := saveConfig(cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "context %s saved (current: %s)\n", name, cfg.CurrentContext)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&c.Server, "server", "", "URL of any orchestrator's HTTP API")
	fs.StringVar(&c.Token, "token", "", "bearer token (stored in the file, mode 0600)")
	fs.StringVar(&c.TokenFile, "token-file", "", "file holding the bearer token, read at each use")
	fs.StringVar(&c.CA, "ca", "", "CA bundle to verify the API's certificate")
	fs.StringVar(&c.Cert, "cert", "", "TLS client certificate file")
	fs.StringVar(&c.Key, "key", "", "TLS client key file")
	fs.BoolVar(&use, "use", false, "make it the current context")
	return cmd
}

// newContextShowCmd is `jobfleet context show`: one context's settings,
// or with --field one value alone, for scripts that call the API without
// the CLI (curl).
func newContextShowCmd() *cobra.Command {
	var field string
	cmd := &cobra.Command{
		Use:   "show [NAME]",
		Short: "Print context NAME (default: the current one); --field server or token prints that value alone",
		Long: `show prints a context's server, where its credential is, and its TLS
files, never the token itself. --field prints one value and nothing else,
for scripts that call the API themselves: server (the API's URL) or token
(the token, read from the context's token file if it names one).`,
		Example: `  curl -H "Authorization: Bearer $(jobfleet context show --field token)" "$(jobfleet context show --field server)/v1/jobs"`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if field != "" && field != "server" && field != "token" {
				return fmt.Errorf("--field must be server or token, got %q", field)
			}
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			name := cfg.CurrentContext
			if len(args) == 1 {
				name = args[0]
			}
			if name == "" {
				return errors.New("no current context (jobfleet dev writes one; jobfleet context ls lists them)")
			}
			c, ok := cfg.Contexts[name]
			if !ok {
				return fmt.Errorf("no context %q (jobfleet context ls lists them)", name)
			}
			out := cmd.OutOrStdout()
			switch field {
			case "server":
				if c.Server == "" {
					return fmt.Errorf("context %s names no server", name)
				}
				_, err := fmt.Fprintln(out, c.Server)
				return err
			case "token":
				t := c.Token
				if t == "" && c.TokenFile != "" {
					if t, err = auth.ReadTokenFile(c.TokenFile); err != nil {
						return err
					}
				}
				if t == "" {
					return fmt.Errorf("context %s names no credential", name)
				}
				_, err := fmt.Fprintln(out, t)
				return err
			}
			cred := "none"
			switch {
			case c.Token != "":
				cred = "a token, in the configuration file"
			case c.TokenFile != "":
				cred = "token file " + c.TokenFile
			}
			current := ""
			if name == cfg.CurrentContext {
				current = " (current)"
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "name\t%s%s\nserver\t%s\ncredential\t%s\n", name, current, c.Server, cred)
			for _, f := range []struct{ key, v string }{{"ca", c.CA}, {"cert", c.Cert}, {"key", c.Key}} {
				if f.v != "" {
					fmt.Fprintf(tw, "%s\t%s\n", f.key, f.v)
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&field, "field", "", "print one value alone: server or token")
	return cmd
}
