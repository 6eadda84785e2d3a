// Command payments-api is a tiny stand-in for a real API, for trying idem
// proxy: POST /charges creates a charge and answers 201 with a new id, so a
// duplicate shows up as a second id. GET /charges lists what was created.
//
//	go run ./examples/payments-api --listen 127.0.0.1:9000
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/idemgo/idem/examples/internal/payments"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9000", "address to serve on")
	flag.Parse()
	log.Printf("payments-api on http://%s", *listen)
	log.Fatal(http.ListenAndServe(*listen, payments.New()))
}
