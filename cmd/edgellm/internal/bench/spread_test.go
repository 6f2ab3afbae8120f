package bench

import (
	"strings"
	"testing"
)

func TestSpread(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want Spread
		rel  float64
		warn bool
	}{
		{"agree", []float64{10, 10.5, 11}, Spread{10, 10.5, 11}, 1 / 10.5, false},
		{"issue 13's bench -t 1", []float64{11.7, 3.2, 5.8}, Spread{3.2, 5.8, 11.7}, 8.5 / 5.8, true},
		{"at the limit", []float64{9, 10, 11}, Spread{9, 10, 11}, 0.2, false},
		{"one repeat", []float64{7}, Spread{7, 7, 7}, 0, false},
		{"none", nil, Spread{}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := spreadOf(tc.xs)
			if s != tc.want {
				t.Fatalf("spread %+v, want %+v", s, tc.want)
			}
			if d := s.Rel() - tc.rel; d > 1e-9 || d < -1e-9 {
				t.Fatalf("rel %.4f, want %.4f", s.Rel(), tc.rel)
			}
			r := &Result{Engine: "native", Repeats: len(tc.xs), DecodeSpread: s}
			w := r.Warnings()
			if (len(w) > 0) != tc.warn {
				t.Fatalf("warnings %q, want warning %v", w, tc.warn)
			}
			if tc.warn && !strings.Contains(w[0], "decode tok/s") {
				t.Fatalf("warning %q does not name the rate", w[0])
			}
		})
	}
}
