#include "textflag.h"

// func mxcsr() uint32
TEXT ·mxcsr(SB), NOSPLIT, $8-4
	STMXCSR 0(SP)
	MOVL    0(SP), AX
	MOVL    AX, ret+0(FP)
	RET

// func setMXCSR(v uint32)
TEXT ·setMXCSR(SB), NOSPLIT, $8-4
	MOVL    v+0(FP), AX
	MOVL    AX, 0(SP)
	LDMXCSR 0(SP)
	RET
