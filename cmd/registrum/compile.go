package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/store/layout"
)

func init() { register(newCompileCmd) }

func newCompileCmd() *cobra.Command {
	var out string
	var production, check, force bool
	cmd := &cobra.Command{
		Use:   "compile PROJECT_DIR (--out PACKAGE_DIR | --check)",
		Short: "Compile a registry project into a package, or check it",
		Long: `Compile reads the project in PROJECT_DIR (registry.yaml and the scripts and
modules it names; naming PROJECT_DIR/registry.yaml itself does too),
enforces every compile-time rule, and writes the package to PACKAGE_DIR.
With --check it only reports. Every finding is listed as
file:line:column: key.path: message [rule]; any finding makes the command
fail with exit code 1. Warnings are listed the same way, after "warning:",
and do not fail the command: declared features this release's record host
does not serve yet (left out of openapi.json), and fields no profile can
read or write (field.ungranted). --production adds the production rules: a
handler for every hook and a pinned digest for every module.

PACKAGE_DIR must be empty, missing, or hold a package of the same registry
(registry.id), which is replaced; a package of another registry, or one this
version cannot read, is replaced only with --force. A folder holding anything
else is never replaced.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if check == (out != "") {
				return withExitCode(2, errors.New("compile: give exactly one of --out PACKAGE_DIR and --check"))
			}
			// The project document itself (registry.yaml) names its folder.
			dir, err := project.Folder(args[0])
			if err != nil {
				return withExitCode(2, fmt.Errorf("compile: %w", err))
			}
			res, err := project.Compile(dir, project.Options{Production: production, Fingerprint: layout.Fingerprint})
			var findings project.Findings
			if errors.As(err, &findings) {
				for _, f := range findings {
					f.File = filepath.Join(dir, f.File) // clickable from the working folder
					fmt.Fprintln(cmd.ErrOrStderr(), f.String())
				}
				return withExitCode(1, fmt.Errorf("compile: %s has %d finding(s)", dir, len(findings)))
			}
			if err != nil {
				return withExitCode(1, fmt.Errorf("compile: %w", err))
			}
			for _, w := range res.Warnings {
				w.File = filepath.Join(dir, w.File)
				fmt.Fprintln(cmd.ErrOrStderr(), w.String())
			}
			if check {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: no findings (revision %s)\n", dir, res.Package.Revision)
				return nil
			}
			if err := checkReplace(out, res.Package.Registry.ID, force); err != nil {
				return withExitCode(1, err)
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
	cmd.Flags().BoolVar(&force, "force", false, "replace a package of another registry in PACKAGE_DIR")
	return cmd
}

// checkReplace refuses to let a compiled package of registry id replace what
// dir holds, unless dir is missing or empty, holds a package of the same
// registry, or force is set and dir holds a package. A folder holding no
// package is left to project's writer, which refuses it.
func checkReplace(dir, id string, force bool) error {
	if _, err := os.Stat(filepath.Join(dir, model.FileName)); err != nil {
		return nil
	}
	old, err := model.Load(dir)
	if err != nil {
		if force {
			return nil
		}
		return fmt.Errorf("compile: %s holds a package this version cannot read (%v); pass --force to replace it", dir, err)
	}
	if old.Registry.ID != id && !force {
		return fmt.Errorf("compile: %s holds the package of registry %q, not %q; pass --force to replace it, or choose another --out", dir, old.Registry.ID, id)
	}
	return nil
}
