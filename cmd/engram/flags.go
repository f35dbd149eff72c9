package main

// Checks every command's flags share: text that is not UTF-8, and numbers outside
// the range their help gives, are bad input naming the flag, before anything is sent.

import (
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// checkUTF8 is every command's first check (the root's PersistentPreRunE): a flag
// or argument that is not UTF-8 (a terminal or file in another encoding) would be
// refused by the API's encoding, so it is refused here, naming the flag.
func checkUTF8(cmd *cobra.Command, args []string) error {
	var bad *pflag.Flag
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if bad == nil && !utf8.ValidString(f.Value.String()) {
			bad = f
		}
	})
	if bad != nil {
		return badFlag(bad.Name, "is not valid UTF-8: check the encoding of the terminal or of the text you pass")
	}
	for i, a := range args {
		if !utf8.ValidString(a) {
			return badArg("argument %d is not valid UTF-8: check the encoding of the terminal or of the text you pass", i+1)
		}
	}
	return nil
}

// checkRange refuses an int flag outside [lo, hi]; a flag left unset (0) keeps
// the server's default.
func checkRange(cmd *cobra.Command, name string, v, lo, hi int, unit string) error {
	if v == 0 && !cmd.Flags().Changed(name) {
		return nil
	}
	if v < lo || v > hi {
		return badFlag(name, "%d is outside [%d, %d]%s", v, lo, hi, unit)
	}
	return nil
}
