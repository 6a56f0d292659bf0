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

/** Asks the gateway whether this browser still has a session: true, false, or undefined (no answer). */
async function stillSignedIn() {
  try {
    const res = await fetch('/auth/user', { credentials: 'same-origin', cache: 'no-store', headers: { 'x-csrf': '1', accept: 'application/json' } });
    if (res.status === 401) return false;
    return res.ok ? true : undefined;
  } catch {
    return undefined;
  }
}

// After a stream is lost while the session lives on (a new sign-in replaced it, the gateway
// refused one more stream, a proxy answered an error), how long to wait before opening it again.
// Bounded: the delays grow to a minute and the page stops trying after the last one.
const REOPEN_DELAYS_MS = [1000, 2000, 4000, 8000, 15000, 30000, 60000, 60000, 60000, 60000];

/**
 * Listens for the current session's events until it ends. `onSignedOut(text)` runs once, with
 * the sentence to show; `onReplaced()` runs when a new sign-in of this browser (another tab, a
 * step-up) replaced the session: the stream is opened again, silently, with the new cookie. The
 * banner and countdown elements are this block's own.
 */
export function watchSession({ banner, countdown, onSignedOut, onReplaced = () => undefined }) {
  if (typeof EventSource !== 'function') return () => undefined;
  let source;
  let ticker;
  let reopenTimer;
  let attempt = 0;
  let ended = false;

  function stopCountdown() {
    clearInterval(ticker);
    countdown.hidden = true;
  }

  function end(text) {
    if (ended) return;
    ended = true;
    source.close();
    clearTimeout(reopenTimer);
    stopCountdown();
    banner.textContent = text;
    banner.hidden = false;
    onSignedOut(text);
  }

  // The stream is gone but maybe not the session: look (GET /auth/user) before telling the user.
  // After a replacement the new cookie may still be on its way (the other tab's redirect), so a
  // 401 right after one is looked at again before it counts.
  function lost({ replaced }) {
    source.close();
    stopCountdown();
    if (ended || attempt >= REOPEN_DELAYS_MS.length) return;
    const delay = REOPEN_DELAYS_MS[attempt];
    attempt += 1;
    reopenTimer = setTimeout(async () => {
      if (ended) return;
      const signedIn = await stillSignedIn();
      if (ended) return;
      if (signedIn === false && !(replaced && attempt < 3)) end('Your session has ended.');
      else if (signedIn === true) {
        // The new session's user and level (a step-up done in another tab shows here).
        if (replaced) onReplaced();
        connect();
      }
      else lost({ replaced });
    }, delay);
  }

  function connect() {
    source = new EventSource('/auth/events');
    // A stream that opened: the next loss starts from the shortest delay again.
    source.addEventListener('open', () => {
      attempt = 0;
    });

    source.addEventListener('signed-out', (event) => {
      let reason;
      try {
        reason = JSON.parse(event.data).reason;
      } catch {
        reason = undefined;
      }
      if (reason === 'replaced') {
        lost({ replaced: true });
        return;
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
    // only on an answer that is not a stream: a 401 (the session ended while we were away), or a
    // 429 (this session has too many streams open, e.g. many tabs).
    source.addEventListener('error', () => {
      if (source.readyState === EventSource.CLOSED) lost({ replaced: false });
    });
  }

  connect();
  return () => {
    ended = true;
    source.close();
    clearTimeout(reopenTimer);
    stopCountdown();
  };
}
