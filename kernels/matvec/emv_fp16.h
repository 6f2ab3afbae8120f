// fp16 -> f32, exactly (ggml's GGML_FP16_TO_FP32): the one definition the
// kernels' C files share.
#ifndef EMV_FP16_H
#define EMV_FP16_H
#include <stdint.h>
#include <string.h>

static inline float emv_h2f(const uint8_t *p) {
	uint16_t h;
	memcpy(&h, p, 2);
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	float f;
	if (exp == 0) {
		f = (float)man * 5.9604644775390625e-8f; // man * 2^-24, exact
		memcpy(&bits, &f, 4);
		bits |= sign;
	} else if (exp == 31) {
		bits = sign | 0x7f800000u | (man << 13);
	} else {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	}
	memcpy(&f, &bits, 4);
	return f;
}

#endif
