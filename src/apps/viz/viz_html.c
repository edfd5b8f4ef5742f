/* One self-contained HTML page (inline CSS and JS, no network) with a head
 * view of attention: pick the layer and heads, hover a query token to see its
 * attention to the keys (lines and key shading), and a heatmap of each head in
 * focus; lines and shading scaled to each row's largest weight, the weight
 * itself in a tooltip. Written to PATH.tmp.<pid> then renamed.
 *
 * The weights are embedded compactly (1.33 bytes each instead of ~9 as JSON
 * numbers): each row of each head as bytes round(255 * p / rowmax), all rows
 * base64 in "a", the row maxima in "rm" (%.6g); the page decodes them to
 * Float32Arrays. Error <= rowmax / 510 per weight; 0 and each row's maximum
 * (1 for a one-hot row) come back exactly. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "apps/viz/viz_internal.h"
#include "io/tmpname.h"


/* s as a JSON string safe inside <script>: '<' '>' '&' and controls escaped. */
static void put_js_string(FILE *f, const char *s) {
  char clean[4 * 64 + 8];
  viz_label_clean(s, clean, sizeof clean, 64);
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)clean; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&')
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

static void put_html_text(FILE *f, const char *s) {
  char clean[4 * 120 + 8];
  viz_label_clean(s, clean, sizeof clean, 120);
  for (const char *p = clean; *p; p++) {
    if (*p == '<')
      fputs("&lt;", f);
    else if (*p == '>')
      fputs("&gt;", f);
    else if (*p == '&')
      fputs("&amp;", f);
    else if (*p == '"')
      fputs("&quot;", f);
    else
      fputc(*p, f);
  }
}

static void put_labels(FILE *f, const char *const *labels, int64_t n) {
  fputc('[', f);
  for (int64_t i = 0; i < n; i++) {
    if (i) fputc(',', f);
    if (labels) {
      put_js_string(f, labels[i]);
    } else {
      fprintf(f, "\"%lld\"", (long long)i);
    }
  }
  fputc(']', f);
}

/* The largest weight of each row, as the page reads it back (%.6g), so the
 * bytes are made with the scale the page uses. NULL when out of memory. */
static float *row_maxima(const float *p, int64_t rows, int64_t n) {
  float *rm = malloc((size_t)(rows > 0 ? rows : 1) * sizeof(float));
  for (int64_t r = 0; rm && r < rows; r++) {
    float m = 0;
    for (int64_t j = 0; j < n; j++)
      if (p[r * n + j] > m) m = p[r * n + j];
    char buf[32];
    snprintf(buf, sizeof buf, "%.6g", (double)m);
    rm[r] = strtof(buf, NULL);
  }
  return rm;
}

/* rows of n weights each as bytes round(255 * p / rm[row]), base64. */
static void put_rows_base64(FILE *f, const float *p, const float *rm, int64_t rows, int64_t n) {
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  unsigned acc = 0;
  int have = 0;
  for (int64_t r = 0; r < rows; r++) {
    const float *x = p + r * n;
    float m = rm[r];
    for (int64_t j = 0; j < n; j++) {
      float v = m > 0 ? 255.0f * x[j] / m : 0.0f;
      long q = v <= 0 ? 0 : v >= 255 ? 255 : lrintf(v);
      acc = (acc << 8) | (unsigned)q;
      if (++have == 3) {
        fputc(b64[(acc >> 18) & 63], f);
        fputc(b64[(acc >> 12) & 63], f);
        fputc(b64[(acc >> 6) & 63], f);
        fputc(b64[acc & 63], f);
        acc = 0;
        have = 0;
      }
    }
  }
  if (have == 1) {
    fputc(b64[(acc >> 2) & 63], f);
    fputc(b64[(acc << 4) & 63], f);
    fputs("==", f);
  } else if (have == 2) {
    fputc(b64[(acc >> 10) & 63], f);
    fputc(b64[(acc >> 4) & 63], f);
    fputc(b64[(acc << 2) & 63], f);
    fputc('=', f);
  }
}

static const char page_css[] =
    "body{font:14px 'DejaVu Sans','Noto Sans CJK SC',sans-serif;margin:16px;color:#222}"
    "h1{font-size:18px}#controls{margin:8px 0}#heads label{margin-right:8px;"
    "padding:1px 4px;border-radius:3px;color:#fff}"
    "#view{display:flex;align-items:flex-start;gap:0}.col{display:flex;flex-direction:column}"
    ".tok{height:20px;line-height:20px;padding:0 6px;white-space:nowrap;cursor:default}"
    "#left .tok{text-align:right}.tok.on{outline:1px solid #333}"
    "#tip{position:fixed;display:none;background:#ffd;border:1px solid #999;padding:2px 6px;"
    "font-size:13px;pointer-events:none;z-index:9}"
    "#heat{display:flex;flex-wrap:wrap;gap:12px;margin-top:8px}#heat figure{margin:0}"
    "#heat canvas{image-rendering:pixelated;border:1px solid #888}#info{margin-top:4px;color:#555}";

/* The page logic: D = {title, layers, heads, lq, lk, q, k, cmap, a, rm};
 * unpack() turns a and rm into A[l][h], the flat row-major [lq*lk] matrix.
 * Lines and key shading are scaled to the largest weight of the row (per
 * head: rmax(h,i); the shading: of the heads' mean), so a row spread over
 * 512 keys shows as clearly as a one-hot one; the tooltip and data-w give
 * the weight itself. */
static const char page_js[] =
    "const $=id=>document.getElementById(id);const R=20;\n"
    "function unpack(){const b=atob(D.a),A=[];let r=0;\n"
    " for(let l=0;l<D.layers;l++){const L=[];for(let h=0;h<D.heads;h++){"
    "const m=new Float32Array(D.lq*D.lk);\n"
    "  for(let i=0;i<D.lq;i++,r++){const s=D.rm[r]/255,o=r*D.lk;"
    "for(let j=0;j<D.lk;j++)m[i*D.lk+j]=b.charCodeAt(o+j)*s;}L.push(m);}A.push(L);}return A;}\n"
    "const A=unpack();\n"
    "let layer=0,sel=new Set([...Array(D.heads).keys()]),hover=-1,hs=[],km=0;\n"
    "const hue=h=>'hsl('+Math.round(h*360/D.heads)+',70%,42%)';\n"
    "function cm(t){t=Math.max(0,Math.min(1,t));const n=D.cmap.length-1,i=Math.min(n,"
    "Math.floor(t*(n+1)));return D.cmap[i];}\n"
    "function w(h,i,j){return A[layer][h][i*D.lk+j];}\n"
    "function rmax(h,i){return D.rm[(layer*D.heads+h)*D.lq+i];}\n"
    "function fmt(v){return v>=0.001||v===0?v.toFixed(4):v.toExponential(2);}\n"
    /* the mean over the selected heads of the hovered row's weight to key j */
    "function kw(j){let v=0;for(const h of hs)v+=w(h,hover,j);return hs.length?v/hs.length:0;}\n"
    "function tipText(j){if(hover<0||!hs.length)return 'key '+j+' \\u201c'+D.k[j]+"
    "'\\u201d: hover a query token (left) first';\n"
    " let t='\\u201c'+D.q[hover]+'\\u201d (query '+hover+') \\u2192 \\u201c'+D.k[j]+"
    "'\\u201d (key '+j+'): weight '+fmt(kw(j))+(hs.length>1?' (mean of '+hs.length+' heads)':'')+"
    "(km>0?', '+Math.round(100*kw(j)/km)+' % of the row\\u2019s largest':'');\n"
    " if(hs.length>1)t+='; '+hs.map(h=>'head '+h+' '+fmt(w(h,hover,j))).join(', ');return t;}\n"
    "function showTip(j,x,y){const t=$('tip');t.textContent=tipText(j);t.style.left=(x+12)+'px';"
    "t.style.top=(y+12)+'px';t.style.display='block';}\n"
    "function setup(){document.title=D.title;$('title').textContent=D.title;\n"
    " const ls=$('layer');for(let l=0;l<D.layers;l++){const o=document.createElement('option');"
    "o.value=l;o.textContent='layer '+l;ls.appendChild(o);}\n"
    " ls.onchange=()=>{layer=+ls.value;draw();};\n"
    " const hb=$('heads');for(let h=0;h<D.heads;h++){const lb=document.createElement('label');"
    "lb.style.background=hue(h);const c=document.createElement('input');c.type='checkbox';"
    "c.checked=true;c.id='head'+h;c.onchange=()=>{c.checked?sel.add(h):sel.delete(h);draw();};"
    "lb.appendChild(c);lb.appendChild(document.createTextNode(' '+h));hb.appendChild(lb);}\n"
    " const L=$('left'),K=$('right');D.q.forEach((t,i)=>{const d=document.createElement('div');"
    "d.className='tok';d.id='q'+i;d.textContent=t;d.onmouseenter=()=>{hover=i;draw();};"
    "L.appendChild(d);});\n"
    " D.k.forEach((t,j)=>{const d=document.createElement('div');d.className='tok';d.id='k'+j;"
    "d.textContent=t;d.onmouseenter=e=>showTip(j,e.clientX,e.clientY);"
    "d.onmousemove=e=>showTip(j,e.clientX,e.clientY);"
    "d.onmouseleave=()=>{$('tip').style.display='none';};K.appendChild(d);});draw();}\n"
    /* hovering: every key of the row, opacity = weight / the row's largest
     * (the faintest 5 % left out); not hovering: each query's strongest keys */
    "function draw(){const c=$('lines'),n=Math.max(D.lq,D.lk);c.width=220;c.height=n*R;\n"
    " const g=c.getContext('2d');g.clearRect(0,0,c.width,c.height);"
    "hs=[...sel].sort((a,b)=>a-b);let drawn=0;\n"
    " for(const h of hs){g.strokeStyle=hue(h);for(let i=0;i<D.lq;i++){"
    "if(hover>=0&&i!==hover)continue;const m=rmax(h,i);if(!(m>0))continue;\n"
    "  for(let j=0;j<D.lk;j++){const t=w(h,i,j)/m;if(t<(hover>=0?0.05:0.5))continue;"
    "g.globalAlpha=hover>=0?t:0.4*t;g.lineWidth=hover>=0?2:1;g.beginPath();"
    "g.moveTo(0,i*R+R/2);g.lineTo(c.width,j*R+R/2);g.stroke();drawn++;}}}\n"
    " g.globalAlpha=1;c.dataset.lines=drawn;\n"
    " for(let i=0;i<D.lq;i++)$('q'+i).classList.toggle('on',i===hover);\n"
    " km=0;if(hover>=0)for(let j=0;j<D.lk;j++)km=Math.max(km,kw(j));\n"
    " for(let j=0;j<D.lk;j++){const e=$('k'+j),v=hover>=0?kw(j):0,t=km>0?v/km:0;"
    "e.dataset.w=v.toFixed(4);e.title=tipText(j);"
    "e.style.background=hover>=0&&t>0?'rgba(40,90,160,'+t.toFixed(3)+')':'';"
    "e.style.color=t>0.5?'#fff':'';}\n"
    " heat();}\n"
    "function heat(){const box=$('heat');box.textContent='';\n"
    " if(!hs.length){$('info').textContent='no head selected';return;}\n"
    " const s=Math.max(2,Math.min(16,Math.floor(360/Math.max(D.lq,D.lk))));\n"
    " for(const h of hs){const "
    "f=document.createElement('figure'),c=document.createElement('canvas'),"
    "cap=document.createElement('figcaption');c.id='heat'+h;c.width=D.lk*s;c.height=D.lq*s;\n"
    "  const g=c.getContext('2d');let mx=0;for(let "
    "i=0;i<D.lq*D.lk;i++)mx=Math.max(mx,A[layer][h][i]);\n"
    "  for(let i=0;i<D.lq;i++)for(let j=0;j<D.lk;j++){g.fillStyle=cm(mx>0?w(h,i,j)/mx:0);"
    "g.fillRect(j*s,i*s,s,s);}\n"
    "  if(hover>=0){g.strokeStyle='#f33';g.lineWidth=2;g.strokeRect(1,hover*s,c.width-2,s);}\n"
    "  cap.textContent='head '+h+' (max '+mx.toFixed(3)+')';cap.style.color=hue(h);"
    "f.appendChild(c);f.appendChild(cap);box.appendChild(f);}\n"
    " $('info').textContent='heatmaps: layer '+layer+', heads '+hs.join(',')+"
    "' (queries down, keys across, each scaled to its max)';}\n"
    /* a URL hash like #layer=1&heads=0,2&hover=3&key=5 replays those choices
     * through the same events a user makes (used by the browser test; handy
     * for links): key=J points at key J, showing its tooltip */
    "function replay(){const h=new URLSearchParams(location.hash.slice(1));\n"
    " if(h.has('layer')){const ls=$('layer');ls.value=h.get('layer');"
    "ls.dispatchEvent(new Event('change'));}\n"
    " if(h.has('heads')){const keep=new Set(h.get('heads').split(',').map(Number));"
    "for(let i=0;i<D.heads;i++){const c=$('head'+i);if(c.checked!==keep.has(i))c.click();}}\n"
    " if(h.has('hover')){const e=$('q'+h.get('hover'));if(e)e.dispatchEvent("
    "new MouseEvent('mouseenter'));}\n"
    " if(h.has('key')){const e=$('k'+h.get('key'));if(e){const r=e.getBoundingClientRect();"
    "e.dispatchEvent(new MouseEvent('mouseenter',{clientX:r.left,clientY:r.top}));}}}\n"
    "setup();replay();\n";

attn_status attn_viz_html_f32(const char *path, const float *probs, int64_t layers, int64_t heads,
                              int64_t lq, int64_t lk, const char *const *q_labels,
                              const char *const *k_labels, const char *title) {
  if (!path || !probs) return attn_set_error(ATTN_EINVAL, "html: NULL path or probs");
  size_t plen = strlen(path);
  if (plen < 6 || strcasecmp(path + plen - 5, ".html"))
    return attn_set_error(ATTN_EINVAL, "html: output '%s' must end in .html", path);
  if (layers < 1 || heads < 1 || lq < 1 || lk < 1 || layers > 256 || heads > 256 || lq > 4096 ||
      lk > 4096 || layers * heads * lq * lk > ATTN_VIZ_HTML_MAX_VALUES)
    return attn_set_error(ATTN_EINVAL,
                          "html: shape [%lld, %lld, %lld, %lld] is out of range (at most %d "
                          "weights; crop the sequence first)",
                          (long long)layers, (long long)heads, (long long)lq, (long long)lk,
                          ATTN_VIZ_HTML_MAX_VALUES);
  int64_t total = layers * heads * lq * lk;
  attn_status st = viz_check_finite(probs, total, "html probs");
  if (st) return st;
  if (!title) title = "attention";
  int64_t rows = layers * heads * lq;
  float *rm = row_maxima(probs, rows, lk);
  char *tmp = rm ? attn_tmp_name(path) : NULL;
  if (!tmp) {
    free(rm);
    return attn_set_error(ATTN_ENOMEM, "html: out of memory");
  }
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    st = attn_set_error(ATTN_EIO, "html: cannot create '%s': %s", tmp, strerror(errno));
    free(tmp);
    free(rm);
    return st;
  }
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>", f);
  put_html_text(f, title);
  fprintf(f, "</title>\n<style>%s</style></head>\n<body>\n<h1 id=\"title\"></h1>\n", page_css);
  fputs("<div id=\"controls\">Layer <select id=\"layer\"></select> &nbsp; Heads <span "
        "id=\"heads\"></span></div>\n<p>Hover a query token (left) to see its attention to the "
        "keys (right): lines and shading are scaled to the row's largest weight; point at a key "
        "for its weight.</p>\n<div id=\"view\"><div id=\"left\" class=\"col\"></div><canvas "
        "id=\"lines\"></canvas><div id=\"right\" class=\"col\"></div></div>\n<div "
        "id=\"heat\"></div><div id=\"info\"></div><div id=\"tip\"></div>\n<script>\nconst "
        "D={\"title\":",
        f);
  put_js_string(f, title);
  fprintf(f, ",\"layers\":%lld,\"heads\":%lld,\"lq\":%lld,\"lk\":%lld,\"q\":", (long long)layers,
          (long long)heads, (long long)lq, (long long)lk);
  put_labels(f, q_labels, lq);
  fputs(",\"k\":", f);
  put_labels(f, k_labels, lk);
  fputs(",\"cmap\":[", f);
  for (int i = 0; i < 64; i++) {
    uint32_t c = viz_cmap_argb(ATTN_CMAP_VIRIDIS, (i + 0.5) / 64);
    fprintf(f, "%s\"#%06x\"", i ? "," : "", (unsigned)(c & 0xffffff));
  }
  fputs("],\"rm\":[", f);
  for (int64_t r = 0; r < rows; r++) fprintf(f, "%s%.6g", r ? "," : "", (double)rm[r]);
  fputs("],\"a\":\"", f);
  put_rows_base64(f, probs, rm, rows, lk);
  free(rm);
  fprintf(f, "\"};\n%s</script>\n</body></html>\n", page_js);
  int bad = ferror(f) | (fflush(f) != 0) | (fsync(fileno(f)) != 0);
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    unlink(tmp);
    free(tmp);
    return attn_set_error(ATTN_EIO, "html: cannot write '%s'", path);
  }
  free(tmp);
  return ATTN_OK;
}
