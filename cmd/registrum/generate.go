package main

import (
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project/generate"
)

func init() { register(newGenerateCmd) }

// GoTypesFile is the file `registrum generate go` writes in its --out folder.
const GoTypesFile = "registry_types.go"

func newGenerateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Generate client code from a compiled package",
	}
	cmd.AddCommand(newGenerateGoCmd())
	return cmd
}

func newGenerateGoCmd() *cobra.Command {
	var pkgDir, out, name string
	cmd := &cobra.Command{
		Use:   "go --package PACKAGE_DIR --out DIR [--go-package NAME]",
		Short: "Generate Go structs of every entity's domainData from a compiled package",
		Long: `Generate writes DIR/` + GoTypesFile + `: one Go struct per entity of the compiled package in
PACKAGE_DIR, with a member per field named after its apiName and the apiName as
its JSON tag, so a registry's Go clients get compile-time field names. Use the
structs with the SDK client (sdk/client): pass one as the data of a create, or
decode a record into one with Record.Decode. The file needs only the standard
library. The Go package name is --go-package, or DIR's base name.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				abs, err := filepath.Abs(out)
				if err != nil {
					return withExitCode(2, err)
				}
				name = strings.ToLower(strings.NewReplacer("-", "", ".", "", "_", "").Replace(filepath.Base(abs)))
			}
			if !token.IsIdentifier(name) || token.IsKeyword(name) {
				return withExitCode(2, fmt.Errorf("generate go: %q is not a Go package name; give --go-package", name))
			}
			p, err := model.Load(pkgDir)
			if err != nil {
				return withExitCode(1, err)
			}
			src, err := generate.GoTypes(p, name)
			if err != nil {
				return withExitCode(1, err)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return withExitCode(1, fmt.Errorf("generate go: %w", err))
			}
			path := filepath.Join(out, GoTypesFile)
			if err := os.WriteFile(path, src, 0o644); err != nil {
				return withExitCode(1, fmt.Errorf("generate go: %w", err))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: package %s, %d entities, from package revision %s\n", path, name, len(p.Entities), p.Revision)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&pkgDir, "package", "", "the compiled package folder (registrum compile --out) (required)")
	f.StringVar(&out, "out", "", "the folder to write "+GoTypesFile+" to (required)")
	f.StringVar(&name, "go-package", "", "the Go package name (default: the base name of --out)")
	for _, n := range []string{"package", "out"} {
		_ = cmd.MarkFlagRequired(n)
	}
	return cmd
}
