package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// APIError is an error in OpenAI's shape: {"error": {"message", "type",
// "param", "code"}}, with the HTTP status it is sent with.
type APIError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
	Code    string `json:"code,omitempty"`
	// RetryAfter, in seconds, is sent as the Retry-After header (429).
	RetryAfter int `json:"-"`
}

func (e *APIError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param,
		Message: fmt.Sprintf(format, args...)}
}

// toAPIError is err as the API error it wraps, or a 500 that carries its
// text: a decoder or tokenizer error of another type is a server fault,
// not a reason to panic the handler.
func toAPIError(err error) *APIError {
	var e *APIError
	if errors.As(err, &e) {
		return e
	}
	return &APIError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

// writeError sends e as the response.
func writeError(w http.ResponseWriter, e *APIError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(struct {
		Error *APIError `json:"error"`
	}{e})
}
