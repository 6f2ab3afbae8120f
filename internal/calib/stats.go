package calib

import (
	"fmt"
	"math"
	"sort"
	"unsafe"

	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/precision"
	"github.com/edgellm/edgellm/kernels"
)

// maxSample bounds the |w| values kept per layer for the percentiles: all of
// them for small models, an even stride through the layer beyond that.
const maxSample = 1 << 20

// layerSample is one layer's σ (exact, over every weight) and a sample of |w|.
type layerSample struct {
	sigma float64
	abs   []float32 // sorted
	n     int64
}

// sampleLayer reads the matrices of one layer (LayerWeights.Matrices) (dequantized row by row
// with ggml's own to_float) into σ and a strided sample of |w|.
func sampleLayer(l *native.LayerWeights) (layerSample, error) {
	var total int64
	mats := l.Matrices()
	for _, t := range mats {
		total += t.Nelements()
	}
	stride := max(1, total/maxSample)
	var s layerSample
	var sum, sum2 float64
	var idx int64
	for _, t := range mats {
		ne0 := int(t.Ne(0))
		rows := int(t.Nelements() / int64(ne0))
		rowBytes := int(t.Nbytes() / int64(rows))
		data := unsafe.Slice((*byte)(t.Data()), t.Nbytes())
		row := make([]float32, ne0)
		for r := range rows {
			if err := kernels.DequantizeRow(t.Type(), data[r*rowBytes:(r+1)*rowBytes], row); err != nil {
				return s, fmt.Errorf("%s: %w", t.Name(), err)
			}
			for _, v := range row {
				x := float64(v)
				sum += x
				sum2 += x * x
				if idx%stride == 0 {
					s.abs = append(s.abs, float32(math.Abs(x)))
				}
				idx++
			}
		}
	}
	s.n = idx
	mean := sum / float64(idx)
	s.sigma = math.Sqrt(max(0, sum2/float64(idx)-mean*mean))
	sort.Slice(s.abs, func(i, j int) bool { return s.abs[i] < s.abs[j] })
	return s, nil
}

// quantile of sorted values (nearest rank).
func quantile(sorted []float32, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)
	return float64(sorted[max(i, 0)])
}

// shareAbove is the share of sorted values > x.
func shareAbove(sorted []float32, x float64) float64 {
	i := sort.Search(len(sorted), func(i int) bool { return float64(sorted[i]) > x })
	return float64(len(sorted)-i) / float64(max(len(sorted), 1))
}

// WeightStats computes each layer's weight statistics and clamp thresholds
// (±k σ) on weight set w.
func WeightStats(w *native.Weights, k float64) ([]precision.WeightStats, []precision.Clamp, error) {
	samples := make([]layerSample, len(w.Layers))
	var pooled []float32
	for i := range w.Layers {
		s, err := sampleLayer(&w.Layers[i])
		if err != nil {
			return nil, nil, fmt.Errorf("layer %d: %w", i, err)
		}
		samples[i] = s
		pooled = append(pooled, s.abs...)
	}
	sort.Slice(pooled, func(i, j int) bool { return pooled[i] < pooled[j] })
	global := quantile(pooled, 0.999)
	ws := make([]precision.WeightStats, len(samples))
	cl := make([]precision.Clamp, len(samples))
	for i, s := range samples {
		ws[i] = precision.WeightStats{Sigma: s.sigma, OutlierShare: shareAbove(s.abs, global), Sampled: int64(len(s.abs))}
		if s.sigma > 0 {
			ws[i].P999Sigma = quantile(s.abs, 0.999) / s.sigma
		}
		th := k * s.sigma
		cl[i] = precision.Clamp{Threshold: th, ShareBeyond: shareAbove(s.abs, th), Flagged: ws[i].OutlierShare >= 0.002}
	}
	return ws, cl, nil
}
