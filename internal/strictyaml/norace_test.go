//go:build !race

package strictyaml

const raceEnabled = false
