// Command payments-api is a tiny stand-in for a real API, for trying idem
// proxy: POST /charges creates a charge and answers 201 with a new id, so a
// duplicate shows up as a second id. GET /charges lists what was created.
//
//	go run ./examples/payments-api --listen 127.0.0.1:9000
package main

import (
	"flag"
	"log"
	"net"
	"net/http"

	"github.com/idemgo/idem/examples/internal/payments"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9000", "address to serve on")
	flag.Parse()
	// Listen before saying where: the line is the sign that requests
	// may be sent.
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("payments-api on http://%s", ln.Addr())
	log.Fatal(http.Serve(ln, payments.New()))
}
