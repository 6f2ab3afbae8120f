package capi

/*
#include "edgellm.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"

	"github.com/edgellm/edgellm/host"
)

// decodeCount is the engine session's count of forward passes (both
// engines count; -1 for a session that does not).
func decodeCount(s host.Session) int64 {
	if d, ok := s.(interface{ DecodeCount() int64 }); ok {
		return d.DecodeCount()
	}
	return -1
}

// restoreReplay restores a 1.1 state (oldStateMagic: vocabulary size, token
// count, tokens): it holds no KV, so its tokens are decoded again.
func restoreReplay(h C.edgellm_session, b []byte) error {
	nv, nt := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
	if uint64(len(b)) != 16+4*uint64(nt) {
		return errorf(statusInvalidArgument, "edgellm_session_restore: %d bytes for %d tokens", len(b), nt)
	}
	s, unlock, err := lockSession("edgellm_session_restore", h)
	if err != nil {
		return err
	}
	defer unlock()
	if v := s.eng.eng.Vocab().NVocab(); int(nv) != v {
		return errorf(statusInvalidArgument, "edgellm_session_restore: a state of a %d-token vocabulary, this model has %d", nv, v)
	}
	if int(nt) > s.cfg.NCtx {
		return errorf(statusInvalidArgument, "edgellm_session_restore: %d tokens, the session's context is %d", nt, s.cfg.NCtx)
	}
	toks := make([]int32, nt)
	for i := range toks {
		toks[i] = int32(binary.LittleEndian.Uint32(b[16+4*i:]))
		if toks[i] < 0 || toks[i] >= int32(nv) {
			return errorf(statusInvalidArgument, "edgellm_session_restore: token %d outside the vocabulary", toks[i])
		}
	}
	if err := s.sess.Truncate(0); err != nil {
		return err
	}
	s.toks, s.toksLost = s.toks[:0], false
	const batch = 256
	for i := 0; i < len(toks); i += batch {
		if err := s.sess.Decode(toks[i:min(i+batch, len(toks))], host.LogitsLast); err != nil {
			s.sess.Truncate(0)
			return fmt.Errorf("edgellm_session_restore: %w", err)
		}
	}
	s.toks = append(s.toks, toks...)
	return nil
}
