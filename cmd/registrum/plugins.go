package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/planners"
	"github.com/registrum/registrum/plugins"
)

func init() { register(newPluginsCmd) }

// pluginsSubcommands holds constructors of further `registrum plugins`
// subcommands defined in other files of this package (verifier commands).
// Append to it from init.
var pluginsSubcommands []func() *cobra.Command

// Exit codes of `registrum plugins run`.
const (
	exitPluginUsage  = 2 // bad flags or input
	exitPluginLoad   = 3 // the module did not load (compile, ABI, digest)
	exitPluginFailed = 4 // the call failed: timeout, memory, trap, invalid-output, refused
)

// newPluginsCmd wires `registrum plugins`: trying and verifying plugin modules.
func newPluginsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "Run and verify sandboxed plugin modules (planners, hook and action handlers)",
	}
	cmd.AddCommand(newPluginsRunCmd(), newPluginsVerifyCmd())
	for _, newCmd := range pluginsSubcommands {
		cmd.AddCommand(newCmd())
	}
	return cmd
}

func newPluginsRunCmd() *cobra.Command {
	var engine, kind, module, pkg, limits, cacheDir string
	var perCall bool
	cmd := &cobra.Command{
		Use:   "run [--package PACKAGE] --engine wasm|tengo --kind planner|hook-handler|action-handler --module FILE|ID [--limits k=v,...] < input.json",
		Short: "Run one call of a module with the host's sandbox and limits, and print its output",
		Long: `Run one call of a module, reading the input document from stdin.

The module runs with exactly the sandbox and limits the host uses. With
--package (a compiled package folder or its package.json), the module must be
one the package pins, named by its file or its id: its bytes must match the
pinned digest, it gets its declared capabilities, and a planner's plan is held
to its declared writes, as in the host; --engine and --kind may then be left
out. Without --package the file runs unpinned under its own digest.

The input is checked first as the host hands it over: {"request":{...}} for a
planner, {"inputs":{...}} for an action handler, and for a hook handler the
captured event body (docs/schemas/plugin-hook-input.schema.json).

On success the validated output is printed in canonical JSON and the exit code
is 0. When the call fails, {"failure":"<kind>"} is printed (kind: timeout,
memory, trap, invalid-output, refused), the cause goes to stderr, and the exit
code is 4. A module that does not load exits 3; bad flags or input exit 2.

--limits takes comma-separated key=value pairs: memoryPages, wallTime (a Go
duration such as 250ms), maxInputBytes, maxOutputBytes, maxAllocs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if module == "" {
				return withExitCode(exitPluginUsage, errors.New("plugins run: --module is required"))
			}
			var m plugins.Module
			var dir string
			if pkg != "" {
				var err error
				if m, dir, err = pinnedModule(pkg, module); err != nil {
					return withExitCode(exitPluginUsage, fmt.Errorf("plugins run: %w", err))
				}
				if engine == "" {
					engine = string(m.Engine)
				}
				if kind == "" {
					kind = string(m.Kind)
				}
				if engine != string(m.Engine) || kind != string(m.Kind) {
					return withExitCode(exitPluginUsage, fmt.Errorf("plugins run: the package pins module %q as a %s %s, not a %s %s", m.ID, m.Engine, m.Kind, engine, kind))
				}
			}
			if !model.Engine(engine).Valid() {
				return withExitCode(exitPluginUsage, fmt.Errorf("plugins run: --engine %q: want wasm or tengo", engine))
			}
			if !model.ModuleKind(kind).Valid() {
				return withExitCode(exitPluginUsage, fmt.Errorf("plugins run: --kind %q: want planner, hook-handler or action-handler", kind))
			}
			l, err := plugins.ParseLimits(limits)
			if err != nil {
				return withExitCode(exitPluginUsage, fmt.Errorf("plugins run: --limits: %w", err))
			}
			cfg := plugins.Config{Limits: l, CacheDir: defaultCacheDir(cacheDir), InstancePerCall: perCall}
			input, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), int64(effectiveMaxInput(l))+1))
			if err != nil {
				return withExitCode(exitPluginUsage, fmt.Errorf("plugins run: read input: %w", err))
			}
			var out []byte
			if pkg != "" {
				out, err = plugins.RunModule(cmd.Context(), cfg, m, dir, input)
			} else {
				out, err = plugins.RunFile(cmd.Context(), cfg, model.Engine(engine), model.ModuleKind(kind), module, input)
			}
			var f *plugins.Failure
			switch {
			case errors.As(err, &f):
				fmt.Fprintf(cmd.OutOrStdout(), "{\"failure\":%q}\n", f.Kind)
				fmt.Fprintf(cmd.ErrOrStderr(), "cause: %v\n", f.Detail())
				return withExitCode(exitPluginFailed, err)
			case errors.Is(err, plugins.ErrInput):
				return withExitCode(exitPluginUsage, fmt.Errorf("plugins run: %w", err))
			case err != nil:
				return withExitCode(exitPluginLoad, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&engine, "engine", "", "module engine: wasm or tengo (with --package: the pinned one)")
	f.StringVar(&kind, "kind", "", "module kind: planner, hook-handler or action-handler (with --package: the pinned one)")
	f.StringVar(&module, "module", "", "module file (.wasm or .tengo); with --package, a pinned module's file, its path in the package (as plugins verify prints it) or its id")
	f.StringVar(&pkg, "package", "", "compiled package (folder or package.json) that pins the module, to run it as the host does")
	f.StringVar(&limits, "limits", "", "limits as key=value pairs, e.g. wallTime=250ms,memoryPages=256")
	f.StringVar(&cacheDir, "cache-dir", "", "compiled WebAssembly cache folder (default: the user cache folder; \"off\" disables)")
	f.BoolVar(&perCall, "instance-per-call", false, "run WebAssembly in a fresh instance (as the host does when configured so)")
	return cmd
}

// pinnedModule returns the module the package at pkg pins under the id or
// the file ref, as the host loads it (a planner with its declared writes),
// and the package folder its path is relative to.
func pinnedModule(pkg, ref string) (plugins.Module, string, error) {
	p, err := model.Load(pkg)
	if err != nil {
		return plugins.Module{}, "", err
	}
	dir := pkg
	if st, err := os.Stat(pkg); err == nil && !st.IsDir() {
		dir = filepath.Dir(pkg)
	}
	// ref is an id, a file from the working folder, or the path inside the
	// package that `plugins verify` prints.
	file, _ := filepath.Abs(ref)
	inPackage := filepath.ToSlash(filepath.Clean(ref))
	for _, m := range p.Modules {
		if path, _ := filepath.Abs(filepath.Join(dir, filepath.FromSlash(m.Path))); m.ID != ref && path != file && m.Path != inPackage {
			continue
		}
		for _, pm := range planners.Modules(p) {
			if pm.ID == m.ID {
				return pm, dir, nil
			}
		}
		return plugins.Module{Module: m}, dir, nil
	}
	return plugins.Module{}, "", fmt.Errorf("--module %q is neither the file nor the id of a module the package %s pins", ref, pkg)
}

func newPluginsVerifyCmd() *cobra.Command {
	var pkg, cacheDir string
	cmd := &cobra.Command{
		Use:   "verify --package FILE",
		Short: "Check a package's pinned modules (files, digests, sandbox contract) without starting the host",
		Long: `Check every module a compiled package pins in the "modules" member of its
package.json exactly as a starting host would: the file exists inside the package
folder, its bytes hash to the pinned sha256 digest, and it compiles under the
sandbox's contract. Prints one line per module; exits 1 listing every problem.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pkg == "" {
				return withExitCode(exitPluginUsage, errors.New("plugins verify: --package is required"))
			}
			mods, err := plugins.VerifyPackage(cmd.Context(), pkg, plugins.Config{CacheDir: defaultCacheDir(cacheDir)})
			if err != nil {
				return err
			}
			for _, m := range mods {
				fmt.Fprintf(cmd.OutOrStdout(), "ok %s %s %s %s %s\n", m.ID, m.Engine, m.Kind, m.Path, m.SHA256)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d module(s) verified\n", len(mods))
			return nil
		},
	}
	cmd.Flags().StringVar(&pkg, "package", "", "the package's package.json")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "compiled WebAssembly cache folder (default: the user cache folder; \"off\" disables)")
	return cmd
}

// defaultCacheDir resolves the --cache-dir flag.
func defaultCacheDir(flag string) string {
	switch flag {
	case "off":
		return ""
	case "":
		if dir, err := os.UserCacheDir(); err == nil {
			return filepath.Join(dir, "registrum", "wazero")
		}
		return ""
	default:
		return flag
	}
}

func effectiveMaxInput(l plugins.Limits) int {
	if l.MaxInputBytes > 0 {
		return l.MaxInputBytes
	}
	return plugins.DefaultMaxInputBytes
}
