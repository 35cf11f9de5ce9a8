package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/sdk/tokensource"
)

func init() { register(newTokenCmd) }

func newTokenCmd() *cobra.Command {
	var tokenURL, clientID, keyFile, audience string
	cmd := &cobra.Command{
		Use:   "token --token-url URL --client-id ID --key FILE [--audience AUD]",
		Short: "Obtain an access token with a private-key-JWT client assertion and print it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := tokensource.LoadKeyFile(keyFile)
			if err != nil {
				return withExitCode(2, err)
			}
			src, err := tokensource.New(tokensource.Config{TokenURL: tokenURL, ClientID: clientID, Key: key, Audience: audience})
			if err != nil {
				return withExitCode(2, err)
			}
			tok, err := src.Token(cmd.Context())
			var refusal *tokensource.Error
			if errors.As(err, &refusal) {
				fmt.Fprintln(cmd.OutOrStdout(), string(refusal.Body))
				return withExitCode(1, err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok.AccessToken)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokenURL, "token-url", "", "token endpoint URL (required)")
	f.StringVar(&clientID, "client-id", "", "client id (required)")
	f.StringVar(&keyFile, "key", "", "the client's private JWK file, owner-only (required)")
	f.StringVar(&audience, "audience", "", "client assertion audience (default: the token URL)")
	for _, name := range []string{"token-url", "client-id", "key"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
