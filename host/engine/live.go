package engine

import "time"

// RepackNone as a repacked-layer count at load repacks nothing (0 is all).
const RepackNone = -1

// Read-ahead at load of the native engine's leading layers (besides a
// count; 0 keeps the default): every layer, or none.
const (
	WillNeedAll  = -1
	WillNeedNone = -2
)

// RepackState is how much of an engine's repacked weights is in use.
type RepackState struct {
	// Layers is the units using their repacked copy (layers from 0 up, the
	// output head counting as one more after the last layer); MaxLayers
	// how many units there are (0 when the weights were loaded without
	// repacking or nothing was eligible).
	Layers, MaxLayers int
	// Bytes is the repacked tensor bytes in use (anonymous memory);
	// MaxBytes the same with every unit repacked.
	Bytes, MaxBytes int64
}

// RepackChange is what one SetRepackLayers call did.
type RepackChange struct {
	From, To           int   // units repacked before and after
	Released, Restored int   // units given back, units repacked again
	ReleasedBytes      int64 // tensor bytes whose pages were given back
	RestoredBytes      int64 // tensor bytes repacked again
	Time               time.Duration
}

// KVChange is what one live change of a session's KV type did.
type KVChange struct {
	From, To KVType
	Changed  bool  // the cache is on To now
	Rows     int   // rows converted (K and V, all layers)
	Released int64 // bytes of pages handed back to the kernel
	// Convert is the time spent converting rows, Release the time spent
	// handing pages back.
	Convert, Release time.Duration
}
