package console_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/jobfleet/jobfleet/console"
)

// The console is mounted under console.Prefix; the API's route table
// does this on every orchestrator.
func ExampleHandler() {
	h := console.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", console.Prefix, nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("X-Frame-Options"))
	// Output: 200 text/html; charset=utf-8 DENY
}
