# bff-gateway container image. Needs BuildKit (the default builder since Docker 23) for the
# RUN --mount lines; no `# syntax=` line, so nothing is pulled besides the Node base image.
#   docker build -t bff-gateway .
#   Behind a registry mirror or a TLS-intercepting proxy, hand npm its settings as a build
#   secret (never a layer):  docker build --secret id=npmrc,src=$HOME/.npmrc -t bff-gateway .
#   docker run --env-file .env -e BFF_CONFIG=/app/config/example.production.yaml -p 3000:3000 bff-gateway
# Without BFF_CONFIG the image starts config/default.yaml: the embedded demo (see docker-compose.yml).

ARG NODE_IMAGE=node:24-bookworm-slim

# ---- build: compile TypeScript with the dev dependencies --------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Scripts are skipped: `prepare` would compile before the sources are copied, and the `node`
# devDependency's install script would download a second Node that this image already has.
# Installing from the lockfile alone keeps this layer cached until dependencies change.
RUN --mount=type=cache,target=/root/.npm --mount=type=secret,id=npmrc,target=/root/.npmrc \
    npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# ---- runtime: production dependencies, compiled code, config and the demo SPA ----------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# oidc-provider and jose are regular dependencies: the demo config starts the dev provider.
RUN --mount=type=cache,target=/root/.npm --mount=type=secret,id=npmrc,target=/root/.npmrc \
    npm ci --omit=dev --ignore-scripts --no-audit --no-fund
COPY --from=build /app/dist ./dist
COPY config ./config
COPY public ./public
# Files stay root-owned: the process can read its code and config but not rewrite them.
USER node
EXPOSE 3000
# Slim images have no curl; Node's own fetch is enough. PORT overrides server.port (SPEC §2).
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/cli.js"]
