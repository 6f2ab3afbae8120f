package kernels

/*
#include "llama.h"
*/
import "C"

import (
	"fmt"
	"sort"
	"strings"
)

// FileType is llama_ftype: the dominant weight type of a model file and the
// target of Quantize.
type FileType int

// File types (the ones llama.cpp's quantize tool offers for plain CPU use).
const (
	FileTypeAllF32 FileType = C.LLAMA_FTYPE_ALL_F32
	FileTypeF16    FileType = C.LLAMA_FTYPE_MOSTLY_F16
	FileTypeBF16   FileType = C.LLAMA_FTYPE_MOSTLY_BF16
	FileTypeQ8_0   FileType = C.LLAMA_FTYPE_MOSTLY_Q8_0
	FileTypeQ5_0   FileType = C.LLAMA_FTYPE_MOSTLY_Q5_0
	FileTypeQ5_1   FileType = C.LLAMA_FTYPE_MOSTLY_Q5_1
	FileTypeQ4_0   FileType = C.LLAMA_FTYPE_MOSTLY_Q4_0
	FileTypeQ4_1   FileType = C.LLAMA_FTYPE_MOSTLY_Q4_1
	FileTypeQ2_K   FileType = C.LLAMA_FTYPE_MOSTLY_Q2_K
	FileTypeQ3_K_S FileType = C.LLAMA_FTYPE_MOSTLY_Q3_K_S
	FileTypeQ3_K_M FileType = C.LLAMA_FTYPE_MOSTLY_Q3_K_M
	FileTypeQ3_K_L FileType = C.LLAMA_FTYPE_MOSTLY_Q3_K_L
	FileTypeQ4_K_S FileType = C.LLAMA_FTYPE_MOSTLY_Q4_K_S
	FileTypeQ4_K_M FileType = C.LLAMA_FTYPE_MOSTLY_Q4_K_M
	FileTypeQ5_K_S FileType = C.LLAMA_FTYPE_MOSTLY_Q5_K_S
	FileTypeQ5_K_M FileType = C.LLAMA_FTYPE_MOSTLY_Q5_K_M
	FileTypeQ6_K   FileType = C.LLAMA_FTYPE_MOSTLY_Q6_K
	FileTypeIQ4_NL FileType = C.LLAMA_FTYPE_MOSTLY_IQ4_NL
)

// fileTypeNames are the names ParseFileType accepts (lower case), as in
// llama.cpp's quantize tool.
var fileTypeNames = map[FileType]string{
	FileTypeAllF32: "f32",
	FileTypeF16:    "f16",
	FileTypeBF16:   "bf16",
	FileTypeQ8_0:   "q8_0",
	FileTypeQ5_0:   "q5_0",
	FileTypeQ5_1:   "q5_1",
	FileTypeQ4_0:   "q4_0",
	FileTypeQ4_1:   "q4_1",
	FileTypeQ2_K:   "q2_k",
	FileTypeQ3_K_S: "q3_k_s",
	FileTypeQ3_K_M: "q3_k_m",
	FileTypeQ3_K_L: "q3_k_l",
	FileTypeQ4_K_S: "q4_k_s",
	FileTypeQ4_K_M: "q4_k_m",
	FileTypeQ5_K_S: "q5_k_s",
	FileTypeQ5_K_M: "q5_k_m",
	FileTypeQ6_K:   "q6_k",
	FileTypeIQ4_NL: "iq4_nl",
}

// String is the upper-case name ("Q4_K_M"), or FileType(n) if unknown.
func (t FileType) String() string {
	if s, ok := fileTypeNames[t]; ok {
		return strings.ToUpper(s)
	}
	return fmt.Sprintf("FileType(%d)", int(t))
}

// FileTypeNames lists the names ParseFileType accepts, sorted.
func FileTypeNames() []string {
	names := make([]string, 0, len(fileTypeNames))
	for _, s := range fileTypeNames {
		names = append(names, s)
	}
	sort.Strings(names)
	return names
}

// ParseFileType parses a file type name, case-insensitively ("q4_k_m",
// "Q8_0"). The error lists the valid names.
func ParseFileType(s string) (FileType, error) {
	ls := strings.ToLower(strings.TrimSpace(s))
	for t, name := range fileTypeNames {
		if name == ls {
			return t, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown file type %q (valid: %s)", ErrInvalidArg, s, strings.Join(FileTypeNames(), ", "))
}
