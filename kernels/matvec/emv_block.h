// One ggml Q8_0 / Q4_0 block as 32 signed weights and its f32 scale, in
// portable C: the one definition the two contracts' scalar references
// (matvec.c's C4, matvec_c8.c's C8) share. Q4_0's low nibbles are elements
// 0..15, its high nibbles 16..31, each value nibble - 8.
#ifndef EMV_BLOCK_H
#define EMV_BLOCK_H
#include "matvec.h"
#include "emv_fp16.h"

#include <string.h>

static inline void emv_block_unpack(int t, const uint8_t *blk, int8_t *w, float *dw) {
	*dw = emv_h2f(blk);
	if (t == EMV_Q8_0) {
		memcpy(w, blk + 2, EMV_QK);
		return;
	}
	for (int i = 0; i < 16; i++) {
		w[i] = (int8_t)((blk[2 + i] & 0x0f) - 8);
		w[i + 16] = (int8_t)((blk[2 + i] >> 4) - 8);
	}
}

#endif
