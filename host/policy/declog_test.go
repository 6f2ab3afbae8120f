package policy

import (
	"context"
	"hash/fnv"
	"os"
	"path/filepath"
	"testing"
)

func TestFNVMatchesStdlib(t *testing.T) {
	b := []byte("edgellm sensors")
	h := fnv.New64a()
	h.Write(b)
	if fnv64a(b) != h.Sum64() {
		t.Fatal("fnv64a differs from hash/fnv")
	}
}

// The log samples every Nth step, every change and every failure, and
// respects its byte cap.
func TestDecisionLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	r := newRuntime(t, testConfig().WithDecisionLog(DecisionLogConfig{Path: path, Every: 10}))
	ctx := context.Background()
	if err := r.LoadFile(ctx, fixture(t, "sensor")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		s, d := testSensors(), current()
		if i >= 50 {
			s.MemAvailableMB = 100 // the decision changes at step 50
		}
		if _, err := r.Decide(ctx, &s, &d); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.LoadFile(ctx, fixture(t, "trap")); err != nil {
		t.Fatal(err)
	}
	s, d := testSensors(), current()
	r.Decide(ctx, &s, &d) // step 100: a failure
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := ReadLog(f)
	if err != nil {
		t.Fatal(err)
	}
	var steps []uint64
	why := map[uint64]string{}
	for _, rec := range recs {
		steps = append(steps, rec.Step)
		why[rec.Step] = rec.Logged
	}
	// step 0 changes (from the zero previous decision), 10..90 samples, 50
	// changes, 100 fails.
	want := []uint64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	if len(steps) != len(want) {
		t.Fatalf("logged steps %v, want %v", steps, want)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Fatalf("logged steps %v, want %v", steps, want)
		}
	}
	if why[50] != "change" || why[100] != "failure" || why[20] != "sample" {
		t.Fatalf("reasons %v", why)
	}
	last := recs[len(recs)-1]
	if last.Outcome != "trap" || last.Fallback != "last_good" || last.Tier != 2 || last.Err == "" || len(last.Sensors) != 16 {
		t.Fatalf("failure record %+v", last)
	}
}

func TestDecisionLogCap(t *testing.T) {
	for _, rotate := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "d.jsonl")
		r := newRuntime(t, testConfig().WithDecisionLog(DecisionLogConfig{Path: path, Every: 1, MaxBytes: 4096, Rotate: rotate}))
		ctx := context.Background()
		if err := r.LoadFile(ctx, fixture(t, "good_a")); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 200; i++ {
			s, d := testSensors(), current()
			r.Decide(ctx, &s, &d)
		}
		r.Close(ctx)
		st := r.Stats()
		fi, err := os.Stat(path)
		if err != nil || fi.Size() > 4096 {
			t.Fatalf("rotate=%v: size %v err %v", rotate, fi.Size(), err)
		}
		_, rotErr := os.Stat(path + ".1")
		if rotate != (rotErr == nil) || (!rotate && st.LogSkipped == 0) || st.LogRecords+st.LogSkipped+st.EventsDropped != 200 {
			t.Fatalf("rotate=%v: .1 exists %v, stats %+v", rotate, rotErr == nil, st)
		}
	}
}
