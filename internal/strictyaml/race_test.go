//go:build race

package strictyaml

const raceEnabled = true
