package serve

import "strings"

// stopFilter holds back generated text that could be the start of a stop
// sequence, so a stop sequence never reaches the client, even split across
// tokens or stream chunks.
type stopFilter struct {
	stops   []string
	pending string
	hit     bool
}

// push adds a piece of generated text and returns the text that is now safe
// to send. After a stop sequence is seen, hit is set and the text before it
// is returned; later pushes return "".
func (f *stopFilter) push(piece string) string {
	if f.hit {
		return ""
	}
	f.pending += piece
	if len(f.stops) == 0 {
		out := f.pending
		f.pending = ""
		return out
	}
	cut := -1
	for _, s := range f.stops {
		if i := strings.Index(f.pending, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		out := f.pending[:cut]
		f.pending, f.hit = "", true
		return out
	}
	// Keep the longest suffix that is a proper prefix of a stop sequence.
	keep := 0
	for _, s := range f.stops {
		for n := min(len(s)-1, len(f.pending)); n > keep; n-- {
			if strings.HasSuffix(f.pending, s[:n]) {
				keep = n
				break
			}
		}
	}
	out := f.pending[:len(f.pending)-keep]
	f.pending = f.pending[len(f.pending)-keep:]
	return out
}

// flush returns what is held back at the end of generation.
func (f *stopFilter) flush() string {
	out := f.pending
	f.pending = ""
	return out
}
