# syntax=docker/dockerfile:1
# tagsched on Debian's own Node.js (trixie: nodejs 20.19). Two images from one file:
#   docker build -t tagsched .                                  the service (the default, last stage)
#   docker build --target agent -t tagsched-worker .            the worker agent, one bundled file
# Both run as a system user, never as root.

ARG DEBIAN_TAG=trixie-slim

FROM debian:${DEBIAN_TAG} AS node
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# Compiles the service into dist/ and bundles the agent (npm run build).
FROM node AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends npm \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src src
COPY migrations migrations
RUN npm run build

# The service's run-time dependencies only.
FROM build AS production-deps
RUN npm ci --omit=dev --no-audit --no-fund

# The agent: one self-contained file, no node_modules.
FROM node AS agent
RUN useradd --system --user-group --home-dir /var/lib/tagsched-worker --create-home --shell /usr/sbin/nologin tagsched-worker \
 && install -d -o tagsched-worker -g tagsched-worker -m 0700 /var/lib/tagsched-bootstrap
COPY --from=build /src/dist/tagsched-worker.mjs /src/dist/tagsched-worker.mjs.LICENSES /usr/lib/tagsched-worker/
COPY LICENSE /usr/share/doc/tagsched-worker/LICENSE
USER tagsched-worker
WORKDIR /var/lib/tagsched-worker
ENV TAGSCHED_WORK_DIR=/var/lib/tagsched-worker
ENTRYPOINT ["/usr/bin/node", "/usr/lib/tagsched-worker/tagsched-worker.mjs"]

# The service: dist/ and the production node_modules.
FROM node AS service
RUN useradd --system --user-group --home-dir /var/lib/tagsched --create-home --shell /usr/sbin/nologin tagsched
WORKDIR /opt/tagsched
COPY --from=production-deps /src/node_modules node_modules
COPY --from=build /src/dist dist
COPY package.json LICENSE ./
USER tagsched
ENV NODE_ENV=production HOST=0.0.0.0 PORT=4000 TAGSCHED_DATA_DIR=/var/lib/tagsched
VOLUME /var/lib/tagsched
EXPOSE 4000
HEALTHCHECK --interval=30s --timeout=5s CMD ["/usr/bin/node", "-e", "fetch('http://127.0.0.1:' + process.env.PORT + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["/usr/bin/node", "dist/src/server.js"]
