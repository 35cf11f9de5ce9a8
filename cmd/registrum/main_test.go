package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/registrum/registrum/internal/binarytest"
	"github.com/registrum/registrum/store/storetest"
)

// binary is the registrum binary built once for the process-level tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "registrum-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if binary, err = binarytest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := storetest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}
