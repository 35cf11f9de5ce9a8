package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/store/layout"
)

func init() { register(newCompileCmd) }

func newCompileCmd() *cobra.Command {
	var out string
	var production, check bool
	cmd := &cobra.Command{
		Use:   "compile PROJECT_DIR (--out PACKAGE_DIR | --check)",
		Short: "Compile a registry project into a package, or check it",
		Long: `Compile reads the project in PROJECT_DIR (registry.yaml and the scripts and
modules it names), enforces every compile-time rule, and writes the package to
PACKAGE_DIR. With --check it only reports. Every finding is listed as
file:line:column: key.path: message [rule]; any finding makes the command fail
with exit code 1. --production adds the production rules: a handler for every
hook and a pinned digest for every module.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if check == (out != "") {
				return withExitCode(2, errors.New("compile: give exactly one of --out PACKAGE_DIR and --check"))
			}
			res, err := project.Compile(args[0], project.Options{Production: production, Fingerprint: layout.Fingerprint})
			var findings project.Findings
			if errors.As(err, &findings) {
				for _, f := range findings {
					f.File = filepath.Join(args[0], f.File) // clickable from the working folder
					fmt.Fprintln(cmd.ErrOrStderr(), f.String())
				}
				return withExitCode(1, fmt.Errorf("compile: %s has %d finding(s)", args[0], len(findings)))
			}
			if err != nil {
				return withExitCode(1, err)
			}
			if check {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: no findings (revision %s)\n", args[0], res.Package.Revision)
				return nil
			}
			if err := res.Write(out); err != nil {
				return withExitCode(1, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: revision %s, schema fingerprint %s\n", out, res.Package.Revision, res.Package.SchemaFingerprint)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "folder to write the package to")
	cmd.Flags().BoolVar(&check, "check", false, "only check the project and list every finding")
	cmd.Flags().BoolVar(&production, "production", false, "apply the production rules")
	return cmd
}
