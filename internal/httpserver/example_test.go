package httpserver_test

import (
	"fmt"
	"io"
	"net/http"

	"github.com/jobfleet/jobfleet/internal/httpserver"
)

func ExampleStart() {
	cfg := httpserver.DefaultConfig()
	cfg.MaxConnections = 100
	s, err := httpserver.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Shutdown()

	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(s.URL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.Proto, " ", string(body))
	// Output: HTTP/1.1 hello
}

func ExampleConnectionCap() {
	// 1024 open files, a quarter kept for etcd clients and the rest of
	// the process, a metrics listener promised 64: the API listener's
	// default of 4096 is lowered to what is left.
	b := httpserver.Budget{OpenFiles: 1024, Reserve: 256}
	perListener, lowered, err := httpserver.ConnectionCap(b, 1, 64, httpserver.DefaultMaxConnections, false)
	fmt.Println(perListener, lowered, err)
	// Output: 704 true <nil>
}
