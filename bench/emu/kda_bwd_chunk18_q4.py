# chunked18 (kdabwd18): fp64 emulation of one diagonal 16 x 16 block of the KDA chunk kernel with the Q4 split
# (diag_rows_split / diag_cols_horner with Q4: 4 x 4 walked triangles + the 4 x 4 squares and the 8 x 8 square on
# m16n8k8 fragment maps) against the direct per-element sums. Prints the max abs error of each side (expect ~1e-15).
import numpy as np
rng=np.random.default_rng(1)
B=16; C=8  # one 16-row block (j0=0), 8 channels (one n-tile), channel index n
a=np.exp(-rng.random((B,C))*2)  # decays
daqk=np.tril(rng.standard_normal((B,B))); dL=np.tril(rng.standard_normal((B,B)),-1)
k=rng.standard_normal((B,C)); q=rng.standard_normal((B,C)); rk=rng.random(B)+.5; rq=rng.random(B)+.5; beta=rng.random(B)
def E(i,j,d):  # prod_{t=j+1..i} a_t
    return np.prod(a[j+1:i+1,d])
dq_ref=np.zeros((B,C)); rp_ref=np.zeros((B,C)); ca_ref=np.zeros((B,C))
for i in range(B):
  for d in range(C):
    dq_ref[i,d]=sum(daqk[i,j]*rk[j]*k[j,d]*E(i,j,d) for j in range(i+1))
    rp_ref[i,d]=sum(dL[i,j]*rk[j]*k[j,d]*E(i,j,d) for j in range(i+1))
for c in range(B):
  for d in range(C):
    ca_ref[c,d]=sum(E(i,c,d)*(daqk[i,c]*rq[i]*q[i,d]+beta[i]*dL[i,c]*rk[i]*k[i,d]) for i in range(c,B))
def mma(Af,Bf):  # Af[lane][4], Bf[lane][2] -> C[lane][4] per the m16n8k8 maps
    A=np.zeros((16,8)); Bm=np.zeros((8,8))
    for ln in range(32):
        g,tq=ln>>2,ln&3
        A[g,tq]=Af[ln][0];A[g+8,tq]=Af[ln][1];A[g,tq+4]=Af[ln][2];A[g+8,tq+4]=Af[ln][3]
        Bm[tq,g]=Bf[ln][0];Bm[tq+4,g]=Bf[ln][1]
    Cm=A@Bm
    return [[Cm[ln>>2,2*(ln&3)],Cm[ln>>2,2*(ln&3)+1],Cm[(ln>>2)+8,2*(ln&3)],Cm[(ln>>2)+8,2*(ln&3)+1]] for ln in range(32)]
j0=0
def q4_decay(after,b,d,tq):
    p=1. if after else a[b,d]
    for u in range(1,4):
        if (u>tq if after else u<=tq): p*=a[b+u,d]
    return p
# ---- row side
dq=np.zeros((32,4)); rp=np.zeros((32,4)); e=np.ones((32,4))
for ln in range(32):
    g,tq=ln>>2,ln&3; r0=j0+g; r1=r0+8
    lo=j0+(g&4)
    for jr in range(r0,lo-1,-1):
        jh=jr+8
        cf=[daqk[r0,jr]*rk[jr],dL[r0,jr]*rk[jr],daqk[r1,jh]*rk[jh],dL[r1,jh]*rk[jh]]
        col=2*tq
        kx=[k[jr,col],k[jr,col+1],k[jh,col],k[jh,col+1]]; ax=[a[jr,col],a[jr,col+1],a[jh,col],a[jh,col+1]]
        for x in range(4):
            t=kx[x]*e[ln,x]; dq[ln,x]+=cf[x&2]*t; rp[ln,x]+=cf[(x&2)+1]*t; e[ln,x]*=ax[x]
# q4 squares
fa=[];bb=[]
for ln in range(32):  # one A fragment: daqk rows of lanes g >= 4, dL of lane g + 4's rows in lanes g < 4
    g,tq=ln>>2,ln&3; own=g>=4; ra=j0+(g|4); rb=ra+8; ja=j0+tq; jb=ja+8
    src=daqk if own else dL
    fa.append([src[ra,ja],0,0,src[rb,jb]])
    d=g
    bb.append([rk[ja]*k[ja,d]*q4_decay(True,j0,d,tq), rk[jb]*k[jb,d]*q4_decay(True,j0+8,d,tq)])
ac=mma(fa,bb)
for ln in range(32):
    own=(ln>>2)>=4
    for x in range(4):
        v=ac[ln-16][x] if ln>=16 else ac[ln][x]  # shfl.up 16
        dq[ln,x]+=e[ln,x]*(ac[ln][x] if own else 0); rp[ln,x]+=e[ln,x]*(v if own else 0)
for ln in range(32):
    g,tq=ln>>2,ln&3; col=2*tq
    f=[np.prod(a[j0+8:j0+12,col]),np.prod(a[j0+8:j0+12,col+1])]
    if g>=4: e[ln,2]*=f[0]; e[ln,3]*=f[1]
# 8x8 square (existing)
fa=[];bb=[]
for ln in range(32):
    g,tq=ln>>2,ln&3; r1=j0+8+g
    fa.append([daqk[r1,j0+tq],dL[r1,j0+tq],daqk[r1,j0+tq+4],dL[r1,j0+tq+4]])
    d=g; R=j0+7
    bb.append([rk[j0+tq]*k[j0+tq,d]*E(R,j0+tq,d), rk[j0+tq+4]*k[j0+tq+4,d]*E(R,j0+tq+4,d)])
acc=mma(fa,bb)
for ln in range(32):
    dq[ln,2]+=e[ln,2]*acc[ln][0]; dq[ln,3]+=e[ln,3]*acc[ln][1]; rp[ln,2]+=e[ln,2]*acc[ln][2]; rp[ln,3]+=e[ln,3]*acc[ln][3]
err=0
for ln in range(32):
    g,tq=ln>>2,ln&3
    for x in range(4):
        i=j0+g+8*(x>>1); d=2*tq+(x&1)
        err=max(err,abs(dq[ln,x]-dq_ref[i,d]),abs(rp[ln,x]-rp_ref[i,d]))
print("row side max err",err)
# ---- column side
h=np.zeros((32,4))
fq=[];fl=[];bq=[];bk=[]
for ln in range(32):
    g,tq=ln>>2,ln&3; r0=j0+g; i1=j0+8+tq; i2=i1+4
    fq.append([daqk[i1,r0],0,daqk[i2,r0],0]); fl.append([dL[i1,r0],0,dL[i2,r0],0])
    d=g; R=j0+7
    e1=E(i1,R,d); e2=E(i2,R,d)
    bq.append([rq[i1]*q[i1,d]*e1,rq[i2]*q[i2,d]*e2]); bk.append([beta[i1]*rk[i1]*k[i1,d]*e1,beta[i2]*rk[i2]*k[i2,d]*e2])
A1=np.array(mma(fq,bq))+np.array(mma(fl,bk))
for ln in range(32): h[ln,0]=A1[ln][0]; h[ln,1]=A1[ln][1]
# q4
fq=[];fl=[];bq=[];bk=[]
for ln in range(32):
    g,tq=ln>>2,ln&3; own=g<4; ca=j0+g; cb=ca+8; ia=j0+4+tq; ib=ia+8
    fq.append([daqk[ia,ca] if own else 0,0,0,daqk[ib,cb] if own else 0]); fl.append([dL[ia,ca] if own else 0,0,0,dL[ib,cb] if own else 0])
    d=g; ea=q4_decay(False,j0+4,d,tq); eb=q4_decay(False,j0+12,d,tq)
    bq.append([rq[ia]*q[ia,d]*ea,rq[ib]*q[ib,d]*eb]); bk.append([beta[ia]*rk[ia]*k[ia,d]*ea,beta[ib]*rk[ib]*k[ib,d]*eb])
A2=np.array(mma(fq,bq))+np.array(mma(fl,bk))
for ln in range(32):
    g,tq=ln>>2,ln&3; own=g<4; col=2*tq
    f=[np.prod(a[j0+4:j0+8,col]),np.prod(a[j0+4:j0+8,col+1])]
    h[ln,0]=(f[0] if own else 1)*h[ln,0]+A2[ln][0]; h[ln,1]=(f[1] if own else 1)*h[ln,1]+A2[ln][1]
    h[ln,2]=A2[ln][2]; h[ln,3]=A2[ln][3]
for ln in range(32):
    g,tq=ln>>2,ln&3; r0=j0+g; r1=r0+8; top=j0+(g|3); col=2*tq
    def step(mul,i):
        ih=i+8
        gq=[daqk[i,r0]*rq[i],daqk[ih,r1]*rq[ih]]; gk=[dL[i,r0]*beta[i]*rk[i],dL[ih,r1]*beta[ih]*rk[ih]]
        qx=[q[i,col],q[i,col+1],q[ih,col],q[ih,col+1]]; kx=[k[i,col],k[i,col+1],k[ih,col],k[ih,col+1]]
        ax=[a[i+1,col],a[i+1,col+1],a[ih+1,col],a[ih+1,col+1]] if mul else [1]*4
        for x in range(4):
            xv=gq[x>>1]*qx[x]+gk[x>>1]*kx[x]
            h[ln,x]=h[ln,x]*ax[x]+xv if mul else h[ln,x]+xv
    step(False,top)
    for i in range(top-1,r0-1,-1): step(True,i)
err=0
for ln in range(32):
    g,tq=ln>>2,ln&3
    for x in range(4):
        c=j0+g+8*(x>>1); d=2*tq+(x&1)
        err=max(err,abs(h[ln,x]-ca_ref[c,d]))
print("col side max err",err)
