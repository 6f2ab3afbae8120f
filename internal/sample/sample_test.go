package sample

import (
	"math"
	"testing"
)

func logitsOf(v ...float32) []float32 { return v }

func TestGreedy(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"max in middle", logitsOf(0, 3, 1), 1},
		{"negative", logitsOf(-5, -1, -3), 1},
		{"tie picks lowest id", logitsOf(2, 2, 1), 0},
		{"last", logitsOf(0, 0, 0, 9), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Params{TopP: 1, RepeatPenalty: 1}, len(tt.logits))
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Sample(tt.logits)
			if err != nil || got != tt.want {
				t.Fatalf("Sample = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	bad := []Params{
		{Temp: float32(math.NaN()), TopP: 1, RepeatPenalty: 1},
		{TopK: -1, TopP: 1, RepeatPenalty: 1},
		{TopP: 0, RepeatPenalty: 1},
		{TopP: 1.5, RepeatPenalty: 1},
		{TopP: 1, MinP: 1, RepeatPenalty: 1},
		{TopP: 1, RepeatPenalty: 0},
		{TopP: 1, RepeatPenalty: 1, RepeatLastN: -2},
	}
	for i, p := range bad {
		if err := p.Validate(); err == nil {
			t.Errorf("case %d: Validate(%+v) = nil, want error", i, p)
		}
	}
	if err := DefaultParams().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(DefaultParams(), 0); err == nil {
		t.Fatal("New with empty vocabulary: want error")
	}
}

func TestSeedDeterminism(t *testing.T) {
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i))) * 3
	}
	draw := func(seed uint64) []int32 {
		p := DefaultParams()
		p.Seed = seed
		s, _ := New(p, len(logits))
		out := make([]int32, 200)
		for i := range out {
			out[i], _ = s.Sample(logits)
			s.Accept(out[i])
		}
		return out
	}
	a, b, c := draw(1), draw(1), draw(2)
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed differs at %d: %d vs %d", i, a[i], b[i])
		}
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("different seeds gave identical sequences")
	}
}

func TestTopKOneIsGreedy(t *testing.T) {
	logits := logitsOf(0.1, 0.5, 2.5, 2.4, -1)
	s, _ := New(Params{Temp: 1.5, TopK: 1, TopP: 1, RepeatPenalty: 1, Seed: 7}, len(logits))
	for i := 0; i < 100; i++ {
		if tok, _ := s.Sample(logits); tok != 2 {
			t.Fatalf("top-k 1 drew %d, want 2", tok)
		}
	}
}

// With temperature 1 and no filters the draw follows softmax(logits).
func TestDistributionMatchesSoftmax(t *testing.T) {
	logits := logitsOf(1, 2, 0, 0.5)
	var z float64
	want := make([]float64, len(logits))
	for i, l := range logits {
		want[i] = math.Exp(float64(l))
		z += want[i]
	}
	s, _ := New(Params{Temp: 1, TopP: 1, RepeatPenalty: 1, Seed: 3}, len(logits))
	const n = 200000
	counts := make([]float64, len(logits))
	for i := 0; i < n; i++ {
		tok, _ := s.Sample(logits)
		s.Accept(tok) // the next position: fresh noise
		counts[tok]++
	}
	for i := range want {
		p := want[i] / z
		got := counts[i] / n
		sd := math.Sqrt(p * (1 - p) / n)
		if math.Abs(got-p) > 5*sd {
			t.Errorf("token %d: frequency %.4f, softmax %.4f (±%.4f)", i, got, p, 5*sd)
		}
	}
}

func TestTopPAndMinPFilter(t *testing.T) {
	// probabilities ≈ 0.64, 0.24, 0.09, 0.03 at temp 1
	logits := logitsOf(3, 2, 1, 0)
	tests := []struct {
		name    string
		p       Params
		allowed map[int32]bool
	}{
		{"top-p 0.5 keeps only the best", Params{Temp: 1, TopP: 0.5, RepeatPenalty: 1}, map[int32]bool{0: true}},
		{"top-p 0.8 keeps two", Params{Temp: 1, TopP: 0.8, RepeatPenalty: 1}, map[int32]bool{0: true, 1: true}},
		{"min-p 0.3 keeps two", Params{Temp: 1, TopP: 1, MinP: 0.3, RepeatPenalty: 1}, map[int32]bool{0: true, 1: true}},
		{"top-k 3", Params{Temp: 1, TopK: 3, TopP: 1, RepeatPenalty: 1}, map[int32]bool{0: true, 1: true, 2: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := New(tt.p, len(logits))
			seen := map[int32]bool{}
			for i := 0; i < 5000; i++ {
				tok, _ := s.Sample(logits)
				s.Accept(tok)
				if !tt.allowed[tok] {
					t.Fatalf("drew filtered token %d", tok)
				}
				seen[tok] = true
			}
			if len(seen) != len(tt.allowed) {
				t.Fatalf("drew %v, want all of %v", seen, tt.allowed)
			}
		})
	}
}

func TestRepeatPenalty(t *testing.T) {
	logits := logitsOf(2.0, 1.9, -1)
	s, _ := New(Params{TopP: 1, RepeatPenalty: 1.5, RepeatLastN: 4}, len(logits))
	if tok, _ := s.Sample(logits); tok != 0 {
		t.Fatalf("before history: %d, want 0", tok)
	}
	s.Accept(0)
	s.Accept(0) // twice: still penalised once
	if tok, _ := s.Sample(logits); tok != 1 {
		t.Fatalf("after penalising 0: %d, want 1", tok)
	}
	for i := 0; i < 4; i++ {
		s.Accept(2) // pushes 0 out of the window of 4
	}
	if tok, _ := s.Sample(logits); tok != 0 {
		t.Fatalf("after 0 left the window: %d, want 0", tok)
	}
	if logits[0] != 2.0 {
		t.Fatal("Sample modified the caller's logits")
	}
}

func TestSampleDoesNotAllocate(t *testing.T) {
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(math.Cos(float64(i) * 0.37))
	}
	for _, p := range []Params{{TopP: 1, RepeatPenalty: 1}, DefaultParams(), {Temp: 0.7, TopP: 0.9, RepeatPenalty: 1.1, RepeatLastN: 64}} {
		s, _ := New(p, len(logits))
		if n := testing.AllocsPerRun(50, func() {
			tok, _ := s.Sample(logits)
			s.Accept(tok)
		}); n != 0 {
			t.Errorf("%+v: %v allocations per token", p, n)
		}
	}
}

func TestErrors(t *testing.T) {
	s, _ := New(DefaultParams(), 4)
	if _, err := s.Sample(nil); err != ErrEmptyLogits {
		t.Fatalf("empty: %v", err)
	}
	if _, err := s.Sample(make([]float32, 5)); err == nil {
		t.Fatal("too many logits: want error")
	}
}

func BenchmarkSample32k(b *testing.B) {
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(math.Cos(float64(i) * 0.37))
	}
	s, _ := New(DefaultParams(), len(logits))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Sample(logits)
	}
}
