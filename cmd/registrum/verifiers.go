package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins/verifier"
)

func init() {
	pluginsSubcommands = append(pluginsSubcommands, newVerifierCheckCmd, newVerifierRunCmd)
}

// Exit codes of `registrum plugins verifier-run` beyond those of `plugins run`.
const (
	exitVerifierRetry    = 4 // the verifier gave no decision (same code as a failed module call)
	exitVerifierRejected = 5 // the verifier rejected the content
)

func newVerifierCheckCmd() *cobra.Command {
	var pkg, secretsRoot string
	cmd := &cobra.Command{
		Use:   "verifier-check --package FILE [--secrets-root DIR]",
		Short: "Check a package's attachment verifiers (binary digests, http credentials) without starting the host",
		Long: `Check every verifier in the "verifiers" member of a package's package.json as a
starting host would: the entry's shape, each go-plugin binary against its pinned
sha256 digest and, with --secrets-root, each http verifier's credential. Prints one
line per verifier; exits 1 listing every problem.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pkg == "" {
				return withExitCode(exitPluginUsage, errors.New("plugins verifier-check: --package is required"))
			}
			specs, err := verifier.CheckPackage(pkg, secretsRoot)
			if err != nil {
				return err
			}
			for _, s := range specs {
				target := s.Path + " " + s.SHA256
				if s.Kind == model.VerifierHTTP {
					target = s.Endpoint
				}
				fmt.Fprintf(cmd.OutOrStdout(), "ok %s %s %s\n", s.ID, s.Kind, target)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d verifier(s) checked\n", len(specs))
			return nil
		},
	}
	cmd.Flags().StringVar(&pkg, "package", "", "the package's package.json")
	cmd.Flags().StringVar(&secretsRoot, "secrets-root", "", "secret root to check http credentials under (skipped when empty)")
	return cmd
}

func newVerifierRunCmd() *cobra.Command {
	var pkg, id, binary, digest, mediaType, slot, secretsRoot string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "verifier-run (--package FILE --id ID | --binary FILE [--sha256 DIGEST]) --media-type TYPE [--slot ID] [--timeout D] CONTENT_FILE",
		Short: "Run an attachment verifier on a file, as the host would, and print its verdict",
		Long: `Run one verification of CONTENT_FILE with the same process, limits and checks
the host uses. The verifier is either an entry of a package (--package, --id) or a
go-plugin binary (--binary; pinned to --sha256, or to its own digest when omitted,
which is what authors want while writing it).

Prints {"outcome":"approved"}, {"outcome":"rejected","reason":"<category>"} or
{"outcome":"retry","cause":"<cause>"}. Exit code: 0 approved, 5 rejected, 4 retry,
3 the verifier could not be opened (digest mismatch, missing file), 2 bad flags.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if mediaType == "" {
				return withExitCode(exitPluginUsage, errors.New("plugins verifier-run: --media-type is required"))
			}
			if (pkg == "") == (binary == "") || (pkg != "") != (id != "") || (binary == "" && digest != "") {
				return withExitCode(exitPluginUsage, errors.New("plugins verifier-run: give either --package with --id, or --binary (with an optional --sha256)"))
			}
			v, err := openVerifier(pkg, id, binary, digest, secretsRoot, timeout)
			if err != nil {
				return withExitCode(exitPluginLoad, err)
			}
			defer v.Close()
			verdict, err := verifier.VerifyFile(cmd.Context(), v, slot, mediaType, args[0])
			if err != nil && verifier.CauseOf(err) == "" {
				return withExitCode(exitPluginUsage, err)
			}
			out := map[string]string{"outcome": string(verdict.Outcome)}
			if verdict.Reason != "" {
				out["reason"] = string(verdict.Reason)
			}
			if c := verifier.CauseOf(err); c != "" {
				out["cause"] = string(c)
			}
			b, _ := canonjson.Marshal(out)
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			switch verdict.Outcome {
			case verifier.Approved:
				return nil
			case verifier.Rejected:
				return withExitCode(exitVerifierRejected, errors.New("rejected"))
			}
			return withExitCode(exitVerifierRetry, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&pkg, "package", "", "a package's package.json holding the verifier")
	f.StringVar(&id, "id", "", "the verifier's id in the package")
	f.StringVar(&binary, "binary", "", "a go-plugin verifier binary")
	f.StringVar(&digest, "sha256", "", "the binary's pinned digest, sha256:<64 hex> (default: its own digest)")
	f.StringVar(&mediaType, "media-type", "", "the content's media type, e.g. application/pdf")
	f.StringVar(&slot, "slot", "evidence", "the attachment slot id passed to the verifier")
	f.StringVar(&secretsRoot, "secrets-root", "", "secret root for an http verifier's credential")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "deadline of the verification")
	return cmd
}

// openVerifier opens the verifier the flags of verifier-run name.
func openVerifier(pkg, id, binary, digest, secretsRoot string, timeout time.Duration) (verifier.VerifyCloser, error) {
	if binary != "" {
		return verifier.OpenBinary(binary, digest, timeout)
	}
	return verifier.OpenByID(pkg, id, verifier.OpenOptions{SecretRoot: secretsRoot, Timeout: timeout})
}
