// The second arithmetic contract, C8 ("8-lane-8"), and its portable scalar
// reference (EMV_SCALAR8, compiled on every architecture so that x86-64 CI
// tests it too). C8 is the contract of the arm64 i8mm kernel
// (matvec_arm64.c), whose SMMLA sums 8 products per output:
// for weight row r, activation row j, block b in order,
//     lane[l] = sum_{i=8l}^{8l+7} w[b][i] * a[b][i]    (exact int32, l = 0..3)
//     s       = f32(d_w[b]) * f32(d_a[b])             (one f32 rounding)
//     acc[l]  = fmaf((float)lane[l], s, acc[l])
// then y = (acc0 + acc2) + (acc1 + acc3).
// The same shape as C4 (matvec.c) with four lanes of 8 products instead of
// eight of 4, so the same argument holds: y[r][j] depends only on weight
// row r, activation row j and k (batch invariance, any thread split), and
// every C8 implementation returns this function's bits. C4 and C8 differ
// in the last bits (different f32 roundings of the same exact integers);
// a caller that needs invariance uses one implementation for every call.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "matvec.h"
#include "emv_block.h"

#include <math.h>
#include <string.h>

void emv_scalar8(int t, const uint8_t *w, size_t ws, int nb, int64_t r0, int64_t r1, const uint8_t *a, size_t as,
                 int n, float *y, size_t ldy) {
	size_t bsz = t == EMV_Q8_0 ? EMV_Q8_BYTES : EMV_Q4_BYTES;
	for (int64_t r = r0; r < r1; r++) {
		float acc[EMV_MAXN][4] = {{0}};
		const uint8_t *wr = w + (size_t)r * ws;
		for (int b = 0; b < nb; b++) {
			int8_t wq[EMV_QK];
			const uint8_t *blk = wr + (size_t)b * bsz;
			float dw;
			emv_block_unpack(t, blk, wq, &dw);
			for (int j = 0; j < n; j++) {
				const uint8_t *ab = a + (size_t)j * as + (size_t)b * EMV_Q8_BYTES;
				const int8_t *aq = (const int8_t *)(ab + 2);
				float s = dw * emv_h2f(ab);
				for (int l = 0; l < 4; l++) {
					int32_t sum = 0;
					for (int i = 8 * l; i < 8 * l + 8; i++) sum += (int32_t)wq[i] * aq[i];
					acc[j][l] = fmaf((float)sum, s, acc[j][l]);
				}
			}
		}
		for (int j = 0; j < n; j++) y[(size_t)j * ldy + r] = (acc[j][0] + acc[j][2]) + (acc[j][1] + acc[j][3]);
	}
}
