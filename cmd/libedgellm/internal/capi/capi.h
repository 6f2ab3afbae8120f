// Internal declarations shared by the cgo preamble and capi.c.
#ifndef EDGELLM_CAPI_H
#define EDGELLM_CAPI_H
#include <stddef.h>
#include <stdint.h>
void edgellm_set_last_error(const char *msg, size_t n);
int edgellm_call_token_callback(edgellm_token_callback cb, const char *text, int32_t len, int32_t token, void *user);
#endif
