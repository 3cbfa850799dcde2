'use strict';

/**
 * A tiny HTTP router with middleware, path parameters and JSON helpers.
 */

const http = require('http');
const { URL } = require('url');

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
let requestCounter = 0;

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** Compiles "/users/:id" into a regular expression and parameter names. */
function compilePath(path) {
  const names = [];
  const pattern = path
    .split('/')
    .map((part) => {
      if (part.startsWith(':')) {
        names.push(part.slice(1));
        return '([^/]+)';
      }
      return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('/');
  return { regex: new RegExp(`^${pattern}/?$`), names };
}

class Router {
  #routes = [];
  middleware = [];

  constructor(options = {}) {
    this.prefix = options.prefix || '';
    this.notFound = options.notFound || ((req, res) => sendJSON(res, 404, { error: 'not found' }));
  }

  use(fn) {
    this.middleware.push(fn);
    return this;
  }

  route(method, path, ...handlers) {
    if (!METHODS.includes(method)) {
      throw new TypeError(`unsupported method ${method}`);
    }
    const { regex, names } = compilePath(this.prefix + path);
    this.#routes.push({ method, regex, names, handlers });
    return this;
  }

  match(method, pathname) {
    for (const route of this.#routes) {
      if (route.method !== method) continue;
      const m = route.regex.exec(pathname);
      if (!m) continue;
      const params = {};
      route.names.forEach((name, i) => {
        params[name] = decodeURIComponent(m[i + 1]);
      });
      return { route, params };
    }
    return null;
  }

  async handle(req, res) {
    requestCounter++;
    const url = new URL(req.url, `http://${req.headers.host || 'localhost'}`);
    const found = this.match(req.method, url.pathname);
    if (!found) {
      return this.notFound(req, res);
    }
    req.params = found.params;
    req.query = Object.fromEntries(url.searchParams);
    const chain = [...this.middleware, ...found.route.handlers];
    let index = 0;
    const next = async (err) => {
      if (err) throw err;
      const fn = chain[index++];
      if (fn) await fn(req, res, next);
    };
    try {
      await next();
    } catch (err) {
      const status = err instanceof HttpError ? err.status : 500;
      sendJSON(res, status, { error: err.message });
    }
  }

  listen(port, callback) {
    const server = http.createServer((req, res) => this.handle(req, res));
    return server.listen(port, callback);
  }
}

for (const method of METHODS) {
  Router.prototype[method.toLowerCase()] = function (path, ...handlers) {
    return this.route(method, path, ...handlers);
  };
}

function sendJSON(res, status, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(data),
  });
  res.end(data);
}

const readBody = (req, limit = 1 << 20) =>
  new Promise((resolve, reject) => {
    let size = 0;
    const parts = [];
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > limit) {
        reject(new HttpError(413, 'body too large'));
        req.destroy();
        return;
      }
      parts.push(chunk);
    });
    req.on('end', () => {
      try {
        resolve(parts.length ? JSON.parse(Buffer.concat(parts).toString('utf8')) : {});
      } catch (e) {
        reject(new HttpError(400, 'invalid JSON'));
      }
    });
    req.on('error', reject);
  });

function logger(prefix) {
  return async function log(req, res, next) {
    const started = Date.now();
    await next();
    console.log(`${prefix} ${req.method} ${req.url} ${res.statusCode} ${Date.now() - started}ms`);
  };
}

module.exports = { Router, HttpError, sendJSON, readBody, logger, compilePath };
