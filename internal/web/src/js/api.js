// The client of tileapi's HTTP API. Every request carries the key from the
// page's field in X-API-Key and is reported, with its response, to the
// listeners: the quota meter and the request log read the response headers.

/**
 * @typedef {Object} Exchange
 * @property {string} label what the request was, for people
 * @property {Response | null} response null when the network failed
 * @property {Object | null} problem the problem+json body of an error
 * @property {Error | null} error the network error, if any
 */

export class Client {
  /**
   * @param {() => string} key returns the API key to send; empty sends none
   */
  constructor(key) {
    this.key = key;
    /** @type {Array<(x: Exchange) => void>} */
    this.listeners = [];
  }

  /** @param {(x: Exchange) => void} f called once per request, on its response */
  subscribe(f) {
    this.listeners.push(f);
  }

  /**
   * Sends GET url and resolves to the Response, whatever its status. It
   * rejects only on a network failure. The browser cache is bypassed: every
   * response the page shows is the server's answer to this request.
   * @param {string} url
   * @param {string} label
   * @return {Promise<Response>}
   */
  async get(url, label) {
    const headers = {};
    const key = this.key();
    if (key) {
      headers['X-API-Key'] = key;
    }
    let response;
    try {
      response = await fetch(url, {headers, cache: 'no-store'});
    } catch (error) {
      this.emit({label, response: null, problem: null, error});
      throw error;
    }
    let problem = null;
    if ((response.headers.get('Content-Type') || '').startsWith('application/problem+json')) {
      problem = await response.clone().json().catch(() => null);
    }
    this.emit({label, response, problem, error: null});
    return response;
  }

  /** @param {Exchange} x */
  emit(x) {
    for (const f of this.listeners) {
      f(x);
    }
  }
}
