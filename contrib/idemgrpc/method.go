package idemgrpc

import (
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// ProtectUnlessIdempotent protects every method except those whose
// descriptor, found in protoregistry.GlobalFiles, declares
// "option idempotency_level" NO_SIDE_EFFECTS or IDEMPOTENT: the gRPC
// counterparts of GET and PUT, which idemhttp passes through; and those
// of the services gRPC-go itself registers next to an application's,
// which only read though their descriptors do not say so: health checking
// (grpc.health.v1.Health), channelz (grpc.channelz.v1.Channelz), the xDS
// client status discovery service that admin.Register adds with channelz
// (envoy.service.status.v3.ClientStatusDiscoveryService), and server
// reflection (grpc.reflection.v1.ServerReflection and its v1alpha).
// Their callers (load balancers' and orchestrators' probes, debugging
// tools such as grpcurl) send no key: with Config.RequireKey they would
// fail with InvalidArgument, and a server would never be seen healthy;
// and the stream interceptor (NewStream) would refuse the streams of a
// client that attaches a key to every call. Methods without a registered
// descriptor are protected.
func ProtectUnlessIdempotent(fullMethod string) bool {
	if service, _, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/"); ok && readOnlyServices[service] {
		return false
	}
	md := methodDescriptor(fullMethod)
	if md == nil {
		return true
	}
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok {
		return true
	}
	switch opts.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS, descriptorpb.MethodOptions_IDEMPOTENT:
		return false
	}
	return true
}

// readOnlyServices are the services of gRPC-go itself whose methods only
// read, though their descriptors declare no idempotency level.
var readOnlyServices = map[string]bool{
	"grpc.health.v1.Health":                                true,
	"grpc.channelz.v1.Channelz":                            true,
	"envoy.service.status.v3.ClientStatusDiscoveryService": true,
	"grpc.reflection.v1.ServerReflection":                  true,
	"grpc.reflection.v1alpha.ServerReflection":             true,
}

// methodDescriptor finds the descriptor of the method fullMethod
// ("/package.Service/Method") in protoregistry.GlobalFiles, or nil.
func methodDescriptor(fullMethod string) protoreflect.MethodDescriptor {
	name := strings.TrimPrefix(fullMethod, "/")
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name[:i] + "." + name[i+1:]))
	if err != nil {
		return nil
	}
	md, _ := d.(protoreflect.MethodDescriptor)
	return md
}

// newResponse returns an empty response message for fullMethod, into which
// a recorded response of type recorded is decoded: Config.NewResponse's, or
// one of the method's registered output type, or one of the recorded type.
// A nil pointer from Config.NewResponse counts as nil: nothing can be
// decoded into it.
func (c *Config) newResponse(fullMethod string, recorded protoreflect.FullName) proto.Message {
	if c.NewResponse != nil {
		if m := c.NewResponse(fullMethod); m != nil && m.ProtoReflect().IsValid() {
			return m
		}
	}
	if md := methodDescriptor(fullMethod); md != nil {
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName()); err == nil {
			return mt.New().Interface()
		}
	}
	if recorded.IsValid() {
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(recorded); err == nil {
			return mt.New().Interface()
		}
	}
	return nil
}
