package kernels

/*
#include <stdlib.h>
#include "llama.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// ChatMessage is one turn of a chat (llama_chat_message).
type ChatMessage struct {
	Role    string
	Content string
}

// ErrChatTemplate is returned by ApplyChatTemplate for a template that
// llama.cpp does not recognise.
var ErrChatTemplate = errors.New("chat template not supported by llama.cpp")

// ApplyChatTemplate formats msgs with a chat template through llama.cpp's
// llama_chat_apply_template: tmpl is a model's tokenizer.chat_template (a
// Jinja text that llama.cpp matches against its built-in list, not a Jinja
// interpreter) or a built-in name such as "chatml". addAssistant ends the
// prompt with the assistant turn's opening.
func ApplyChatTemplate(tmpl string, msgs []ChatMessage, addAssistant bool) (string, error) {
	if tmpl == "" {
		return "", fmt.Errorf("%w: empty template", ErrChatTemplate)
	}
	ctmpl := C.CString(tmpl)
	defer C.free(unsafe.Pointer(ctmpl))
	n := len(msgs)
	if n == 0 {
		return "", errors.New("chat template: no messages")
	}
	cm := (*[1 << 20]C.struct_llama_chat_message)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.struct_llama_chat_message{}))))[:n:n]
	defer C.free(unsafe.Pointer(&cm[0]))
	total := len(tmpl)
	for i, m := range msgs {
		cm[i].role = C.CString(m.Role)
		cm[i].content = C.CString(m.Content)
		total += len(m.Role) + len(m.Content)
	}
	defer func() {
		for i := range cm {
			C.free(unsafe.Pointer(cm[i].role))
			C.free(unsafe.Pointer(cm[i].content))
		}
	}()
	size := 2*total + 256
	for attempt := 0; attempt < 2; attempt++ {
		buf := (*C.char)(C.malloc(C.size_t(size)))
		r := C.llama_chat_apply_template(ctmpl, &cm[0], C.size_t(n), C.bool(addAssistant), buf, C.int32_t(size))
		if r < 0 {
			C.free(unsafe.Pointer(buf))
			return "", ErrChatTemplate
		}
		if int(r) <= size {
			s := C.GoStringN(buf, r)
			C.free(unsafe.Pointer(buf))
			return s, nil
		}
		C.free(unsafe.Pointer(buf))
		size = int(r) + 1
	}
	return "", errors.New("chat template: output size changed between calls")
}
