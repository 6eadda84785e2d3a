module github.com/idemgo/idem/contrib/idemecho

go 1.26.0

require (
	github.com/idemgo/idem v0.0.0
	github.com/labstack/echo/v4 v4.16.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/labstack/gommon v0.5.0 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasttemplate v1.2.2 // indirect
	golang.org/x/crypto v0.53.0 // indirect
	golang.org/x/net v0.56.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)

replace github.com/idemgo/idem => ../..
