package runstats

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestRoundTrip: what the Writer writes, Parse reads back field for field.
func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.now = func() time.Time { return time.UnixMicro(1234) }
	w.Start(5, 2, 1, 77)
	w.Token(0, 1, &Decision{K: 3, Window: 512, Threads: 2})
	w.Token(1, 0, nil)
	w.Token(1, 0, &Decision{Threads: 1, HasCPU: true, CPUOther: 0.875, CPUPSIRecent: 46.5, HasStepRatio: true, StepRatio: 1.25})
	w.TokenLayers(2, 0, nil, &Layers{US: []float64{18.2, 16.5}, StepUS: 40.25})
	w.Sets(3, []int{0, 2, 1})
	w.Round(4, 4, 3, 2)
	w.End(2, 48.125, 35600*time.Microsecond, &Policy{Calls: 13, Changes: 1, Swaps: 1, Failures: 2}, errors.New(`a "quoted" error`))
	want := []Event{
		{Event: Start, UnixUS: 1234, PromptTokens: 5, NTiers: 2, Tier: 1, PID: 77},
		{Event: Token, UnixUS: 1234, I: 0, Tier: 1, K: 3, Window: 512, Threads: 2},
		{Event: Token, UnixUS: 1234, I: 1},
		{Event: Token, UnixUS: 1234, I: 1, Threads: 1, CPUOther: 0.875, CPUPSIRecent: 46.5, StepRatio: 1.25},
		{Event: Token, UnixUS: 1234, I: 2, LayerLatencyUS: []float64{18.2, 16.5}, StepComputeUS: 40.25},
		{Event: Sets, UnixUS: 1234, I: 3, LayerSets: []int{0, 2, 1}},
		{Event: Round, UnixUS: 1234, I: 4, K: 4, Drafted: 3, Accepted: 2},
		{Event: End, UnixUS: 1234, Generated: 2, DecodeTPS: 48.125, PrefillMs: 35.6, PolicyCalls: 13, PolicyChanges: 1, TierSwaps: 1, PolicyFailures: 2, Error: `a "quoted" error`},
	}
	lines := strings.SplitAfter(b.String(), "\n")
	if len(lines) != len(want)+1 || lines[len(want)] != "" {
		t.Fatalf("%d lines: %q", len(lines), b.String())
	}
	for i, l := range lines[:len(want)] {
		ev, err := Parse([]byte(l))
		if err != nil || !reflect.DeepEqual(ev, want[i]) {
			t.Errorf("line %d %q: %+v, %v; want %+v", i, l, ev, err, want[i])
		}
	}
	if testing.AllocsPerRun(100, func() { w.Token(2, 0, &Decision{K: 1, HasCPU: true, CPUOther: 0.5}) }) != 0 {
		t.Error("Token allocates")
	}
}

// TestTail: a follower sees complete lines only, across polls.
func TestTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	tl := NewTail(p)
	defer tl.Close()
	var got []Event
	poll := func() {
		if err := tl.Poll(func(ev Event) { got = append(got, ev) }); err != nil {
			t.Fatal(err)
		}
	}
	poll() // not created yet
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(`{"event":"token","i":0}` + "\n" + `{"event":"tok`)
	poll()
	if len(got) != 1 || got[0].I != 0 {
		t.Fatalf("after a line and a half: %+v", got)
	}
	f.WriteString(`en","i":1}` + "\n")
	poll()
	if len(got) != 2 || got[1].I != 1 || got[1].Event != Token {
		t.Fatalf("after completing the line: %+v", got)
	}
	f.WriteString("{\"event\":\"bogus\"}\n")
	if err := tl.Poll(func(Event) {}); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("unknown event accepted: %v", err)
	}
}

// FuzzParse: Parse never panics, and what it accepts re-encodes to a line
// it accepts again with the same fields.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"event":"start","unix_us":1,"prompt_tokens":5,"n_tiers":2,"tier":0,"pid":123}`))
	f.Add([]byte(`{"event":"end","unix_us":1,"generated":200,"decode_tps":48.1,"prefill_ms":35.6,"error":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := Parse(b)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		w := NewWriter(&buf)
		w.now = func() time.Time { return time.UnixMicro(ev.UnixUS) }
		want := Event{Event: ev.Event, UnixUS: ev.UnixUS, Tier: ev.Tier}
		switch ev.Event {
		case Start:
			w.Start(ev.PromptTokens, ev.NTiers, ev.Tier, ev.PID)
			want.PromptTokens, want.NTiers, want.PID = ev.PromptTokens, ev.NTiers, ev.PID
		case Token:
			w.Token(ev.I, ev.Tier, &Decision{K: ev.K, Window: ev.Window, Threads: ev.Threads})
			want.I, want.K, want.Window, want.Threads = ev.I, ev.K, ev.Window, ev.Threads
		case End:
			return // floats are written to 3 decimals: not a round trip
		}
		again, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("re-encoded %q: %v", buf.String(), err)
		}
		if !reflect.DeepEqual(again, want) {
			t.Fatalf("%+v re-encoded as %+v, want %+v", ev, again, want)
		}
	})
}
