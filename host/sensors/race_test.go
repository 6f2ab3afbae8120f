//go:build race

package sensors

const raceEnabled = true
