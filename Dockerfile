# syntax=docker/dockerfile:1
# tileapi as a static binary in a distroless image that runs as nonroot.
#   docker build -t tileapi .
#   docker run --rm -p 8080:8080 tileapi          # embedded mode: no Redis, no database
# The admin API has no token until one is given (TILEAPI_ADMIN_TOKEN, 32
# characters or more), and its listener (TILEAPI_ADMIN_ADDR) is on the
# container's own loopback, out of reach; to reach it from the host only:
#   -e TILEAPI_ADMIN_ADDR=:8081 -p 127.0.0.1:8081:8081

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum go.work ./
COPY quota/go.mod quota/go.sum ./quota/
RUN go mod download
COPY . .
ARG VERSION=dev
# CGO_ENABLED=0: a static binary, so the final image needs no libc.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/tileapi ./cmd/tileapi

# distroless/static: CA certificates, tzdata and /etc/passwd, no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tileapi /tileapi
# nonroot is uid 65532 in distroless images.
USER 65532:65532
ENV TILEAPI_ADDR=:8080
EXPOSE 8080
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 CMD ["/tileapi", "healthcheck"]
ENTRYPOINT ["/tileapi"]
CMD ["serve"]
