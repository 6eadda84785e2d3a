module github.com/idemgo/idem/contrib/idemgrpc

go 1.26.0

require (
	github.com/idemgo/idem v0.0.0
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)

replace github.com/idemgo/idem => ../..
