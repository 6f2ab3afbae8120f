//go:build !race

package sensors

const raceEnabled = false
