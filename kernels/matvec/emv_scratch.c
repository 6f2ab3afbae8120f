// See emv_scratch.h.
#include "emv_scratch.h"

#include <stdlib.h>

static __thread uint8_t *emv_scratch_buf[EMV_SCRATCH_SLOTS];
static __thread size_t emv_scratch_cap[EMV_SCRATCH_SLOTS];

uint8_t *emv_scratch_get(int slot, size_t bytes) {
	if (slot < 0 || slot >= EMV_SCRATCH_SLOTS) return NULL;
	if (bytes > emv_scratch_cap[slot]) {
		free(emv_scratch_buf[slot]);
		size_t cap = (bytes + 4095) & ~(size_t)4095;
		emv_scratch_buf[slot] = aligned_alloc(64, cap);
		emv_scratch_cap[slot] = emv_scratch_buf[slot] ? cap : 0;
	}
	return emv_scratch_buf[slot];
}
