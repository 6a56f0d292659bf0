// Live session (issue 16): the gateway's GET /auth/events tells this page when its session ends
// elsewhere (another tab, another device, the provider) or is about to time out. EventSource
// sends the HttpOnly cookie by itself; it cannot add the CSRF header, so the gateway checks
// Origin and Sec-Fetch-Site instead. Kept apart from app.js: it only needs two elements and a
// callback.

const REASONS = {
  logout: 'You were signed out in another tab.',
  'provider-logout': 'You were signed out by the provider.',
  revoked: 'Your session was ended from another browser or device.',
  expired: 'Your session has expired.',
};

function formatLeft(ms) {
  const total = Math.max(0, Math.ceil(ms / 1000));
  const minutes = Math.floor(total / 60);
  const seconds = String(total % 60).padStart(2, '0');
  return `${minutes}:${seconds}`;
}

/**
 * Listens for the current session's events until it ends. `onSignedOut(text)` runs once, with
 * the sentence to show; the banner and countdown elements are this block's own.
 */
export function watchSession({ banner, countdown, onSignedOut }) {
  if (typeof EventSource !== 'function') return () => undefined;
  const source = new EventSource('/auth/events');
  let ticker;
  let ended = false;

  function stopCountdown() {
    clearInterval(ticker);
    countdown.hidden = true;
  }

  function end(text) {
    if (ended) return;
    ended = true;
    source.close();
    stopCountdown();
    banner.textContent = text;
    banner.hidden = false;
    onSignedOut(text);
  }

  source.addEventListener('signed-out', (event) => {
    let reason;
    try {
      reason = JSON.parse(event.data).reason;
    } catch {
      reason = undefined;
    }
    end(REASONS[reason] ?? 'Your session has ended.');
  });

  source.addEventListener('session-ending', (event) => {
    let secondsLeft;
    try {
      secondsLeft = Number(JSON.parse(event.data).secondsLeft);
    } catch {
      return;
    }
    if (!Number.isFinite(secondsLeft)) return;
    const endsAt = Date.now() + secondsLeft * 1000;
    const render = () => {
      countdown.textContent = `Your session ends in ${formatLeft(endsAt - Date.now())}. Sign in again to keep working.`;
      countdown.hidden = false;
    };
    clearInterval(ticker);
    render();
    ticker = setInterval(render, 1000);
  });

  // EventSource reconnects by itself after a network error or a gateway restart; it gives up
  // only on an answer that is not a stream (401: the session ended while we were away).
  source.addEventListener('error', () => {
    if (source.readyState === EventSource.CLOSED) end('Your session has ended.');
  });

  return () => {
    ended = true;
    source.close();
    stopCountdown();
  };
}
