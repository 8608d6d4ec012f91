#!/bin/sh
# Regenerates the Swift code for the remote worker protocol (Protos/jobtop_remote.proto) into
# Sources/SchedulerRemote/Generated. The output is committed, so building jobtop never needs
# protoc; run this only after editing the .proto.
#
# Needs protoc (Debian/Ubuntu: `apt-get install -y protobuf-compiler`). The two Swift plugins
# are built from the package's own dependency checkouts (swift-protobuf, grpc-swift-protobuf),
# so their versions match the runtime libraries the code links against.
#
# Usage: Scripts/generate-protos.sh            (plugins built, debug, in .build-protoc-plugins)
#        SCRATCH=.build-xyz Scripts/generate-protos.sh
set -eu

cd "$(dirname "$0")/.."
SCRATCH="${SCRATCH:-.build-protoc-plugins}"
CONFIG="${CONFIG:-debug}"
OUT=Sources/SchedulerRemote/Generated

command -v protoc >/dev/null 2>&1 || {
    echo "generate-protos: protoc not found; install it (apt-get install -y protobuf-compiler)" >&2
    exit 1
}

swift build --scratch-path "$SCRATCH" -c "$CONFIG" --product protoc-gen-swift
swift build --scratch-path "$SCRATCH" -c "$CONFIG" --product protoc-gen-grpc-swift-2
BIN="$(swift build --scratch-path "$SCRATCH" -c "$CONFIG" --show-bin-path)"

mkdir -p "$OUT"
protoc \
    --proto_path=Protos \
    --plugin=protoc-gen-swift="$BIN/protoc-gen-swift" \
    --plugin=protoc-gen-grpc-swift="$BIN/protoc-gen-grpc-swift-2" \
    --swift_opt=Visibility=Internal \
    --swift_out="$OUT" \
    --grpc-swift_opt=Visibility=Internal,Client=true,Server=true \
    --grpc-swift_out="$OUT" \
    Protos/jobtop_remote.proto

echo "generate-protos: wrote $(ls "$OUT"/*.swift | tr '\n' ' ')"
