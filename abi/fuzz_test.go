package abi

import (
	"bytes"
	"testing"
)

// FuzzDecodeSensors: decoding arbitrary bytes never panics, and
// decode → encode → decode → encode is stable (compared as bytes, so NaN
// payloads count as equal).
func FuzzDecodeSensors(f *testing.F) {
	s := fullSensors()
	good := make([]byte, SensorsSize)
	_ = EncodeSensors(good, &s)
	f.Add(good)
	f.Add(good[:HeaderSize])
	f.Add(append(append([]byte(nil), good...), 1, 2, 3))
	f.Add([]byte{1, 0, 0, 0, 0, 3, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var a, b Sensors
		if err := DecodeSensors(data, &a); err != nil {
			return
		}
		e1 := make([]byte, SensorsSize)
		e2 := make([]byte, SensorsSize)
		if err := EncodeSensors(e1, &a); err != nil {
			t.Fatal(err)
		}
		if err := DecodeSensors(e1, &b); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if err := EncodeSensors(e2, &b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e1, e2) {
			t.Fatal("decode→encode→decode not stable")
		}
	})
}

// FuzzDecodeDecision is FuzzDecodeSensors for Decision.
func FuzzDecodeDecision(f *testing.F) {
	d := fullDecision()
	good := make([]byte, DecisionSize)
	_ = EncodeDecision(good, &d)
	f.Add(good)
	f.Add(good[:HeaderSize])
	bad := append([]byte(nil), good...)
	bad[offDReasonLen] = 200
	f.Add(bad)
	f.Fuzz(func(t *testing.T, data []byte) {
		var a, b Decision
		if err := DecodeDecision(data, &a); err != nil {
			return
		}
		if int(a.ReasonLen) > ReasonTextSize {
			t.Fatalf("ReasonLen %d", a.ReasonLen)
		}
		_ = a.Reason()
		e1 := make([]byte, DecisionSize)
		e2 := make([]byte, DecisionSize)
		if err := EncodeDecision(e1, &a); err != nil {
			t.Fatal(err)
		}
		if err := DecodeDecision(e1, &b); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if err := EncodeDecision(e2, &b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e1, e2) {
			t.Fatal("decode→encode→decode not stable")
		}
	})
}
