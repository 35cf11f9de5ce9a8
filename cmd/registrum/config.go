package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/internal/envconfig"
	"github.com/registrum/registrum/issuer"
)

func init() { register(newConfigCmd) }

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Check a configuration as the services would load it"}
	var path string
	var forIssuer bool
	check := &cobra.Command{
		Use:   "check --config FILE [--issuer]",
		Short: "Validate a configuration with its environment overrides and print the effective configuration",
		Long: `Check loads the configuration file as ` + "`registrum serve`" + ` (or, with --issuer,
` + "`registrum issuer serve`" + `) would: the file, then every environment variable
that overrides one of its keys (` + config.EnvPrefix + `… for the record host,
` + issuer.EnvPrefix + `… for the issuer), validated together. It prints the
effective configuration, each overridden key named with its variable, and
exits 0; a refusal names the file and line, or the variable, and exits 2.
Secrets never appear: the configurations name them by file reference only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var doc []byte
			var overrides []envconfig.Override
			if forIssuer {
				cfg, err := issuer.LoadConfig(path)
				if err != nil {
					return withExitCode(2, err)
				}
				doc, overrides = cfg.Effective()
			} else {
				cfg, err := config.Load(path)
				if err != nil {
					return withExitCode(2, err)
				}
				if doc, overrides, err = cfg.Effective(); err != nil {
					return withExitCode(2, err)
				}
			}
			printEffective(cmd.OutOrStdout(), path, doc, overrides)
			return nil
		},
	}
	check.Flags().StringVar(&path, "config", "", "the configuration file (required)")
	check.Flags().BoolVar(&forIssuer, "issuer", false, "the file is the issuer's configuration (registrum issuer serve)")
	_ = check.MarkFlagRequired("config")
	cmd.AddCommand(check)
	return cmd
}

// printEffective writes the effective configuration: a comment per
// overridden key, then the document.
func printEffective(w io.Writer, path string, doc []byte, overrides []envconfig.Override) {
	fmt.Fprintf(w, "# %s is valid. Effective configuration", path)
	if len(overrides) == 0 {
		fmt.Fprintln(w, " (no environment overrides):")
	} else {
		fmt.Fprintln(w, ", with these keys from the environment:")
		for _, o := range overrides {
			fmt.Fprintf(w, "#   %s from %s\n", o.Path, o.Variable)
		}
	}
	w.Write(doc)
}
