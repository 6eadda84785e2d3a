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
// counterparts of GET and PUT, which idemhttp passes through. Methods
// without a registered descriptor are protected.
func ProtectUnlessIdempotent(fullMethod string) bool {
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
