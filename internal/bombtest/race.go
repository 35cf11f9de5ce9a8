//go:build race

package bombtest

const raceEnabled = true
